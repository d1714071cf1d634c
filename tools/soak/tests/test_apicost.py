"""The API cost: growth summed across API server restarts, virt-api's 5xx put on the
right account."""

from __future__ import annotations

from kv_soak.apicost import ApiCost, parse_counters

METRICS = """\
# HELP apiserver_request_total [STABLE] Counter of apiserver requests
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="apiserver",dry_run="",group="kubevirt.io",resource="virtualmachines",scope="resource",subresource="",verb="GET",version="v1"} {get}
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="pods",scope="namespace",subresource="",verb="POST",version="v1"} 5
apiserver_request_total{code="503",component="apiserver",dry_run="",group="subresources.kubevirt.io",resource="virtualmachines",scope="resource",subresource="start",verb="PUT",version="v1"} {bad}
apiserver_admission_webhook_request_total{code="500",name="virtualmachine-validator.kubevirt.io",operation="CREATE",rejected="true",type="validating"} {hook}
apiserver_request_duration_seconds_bucket{le="0.1",verb="GET"} 99
"""


def _text(get: float, bad: float = 0, hook: float = 0) -> str:
    return (
        METRICS.replace("{get}", str(get)).replace("{bad}", str(bad)).replace("{hook}", str(hook))
    )


def test_counters_are_parsed_and_other_series_ignored() -> None:
    sample = parse_counters(_text(10))
    assert len(sample) == 4
    assert all(name.endswith("_total") for name, _ in sample)


def test_growth_is_summed_across_a_restart() -> None:
    cost = ApiCost()
    cost.add(parse_counters(_text(10)), during_fault=False)
    cost.add(parse_counters(_text(25)), during_fault=False)
    cost.add(parse_counters(_text(4)), during_fault=False)  # restarted: 4 new requests
    assert cost.requests[("GET", "virtualmachines.kubevirt.io")] == 15 + 4
    assert cost.requests[("POST", "pods")] == 0  # never grew
    assert cost.samples == 3


def test_virt_api_5xx_go_to_the_fault_account_only_during_a_fault() -> None:
    cost = ApiCost()
    cost.add(parse_counters(_text(1, bad=0, hook=0)), during_fault=False)
    cost.add(parse_counters(_text(1, bad=2, hook=0)), during_fault=True)
    cost.add(parse_counters(_text(1, bad=3, hook=1)), during_fault=False)
    assert cost.virt_api_5xx_during_faults == 2
    assert cost.virt_api_5xx == 2
    assert cost.virt_api_5xx_kinds == {
        "503 virtualmachines/start.subresources.kubevirt.io": 3,
        "500 virtualmachine-validator.kubevirt.io": 1,
    }
    assert cost.by_verb()[0] == ("PUT", 3)
