"""VirtualMachineInstancePresets: which match, what merges, what conflicts, as upstream."""

from __future__ import annotations

import base64
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, cast

import pytest
from aiohttp.test_utils import TestClient, TestServer
from kube_runtime import ApiError, KubeClient
from virt_api.app import build_app
from virt_api.frontproxy import FrontProxyConfig
from virt_api.presets import (
    DEPRECATION_WARNING,
    EXCLUDE_ANNOTATION,
    ApiPresets,
    PresetError,
    annotation_key,
    apply_presets,
)
from virt_api.subresources import SubresourceContext
from virt_api.webhooks import AdmissionContext


def vmi(labels: Mapping[str, str] | None = None, **domain: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstance",
        "metadata": {"name": "v", "namespace": "ns", "labels": dict(labels or {"flavor": "big"})},
        "spec": {"domain": {"devices": {}, **domain}},
    }


def preset(name: str, selector: Mapping[str, Any] | None = None, **domain: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstancePreset",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {
            "selector": {"matchLabels": {"flavor": "big"}} if selector is None else selector,
            "domain": domain,
        },
    }


def domain(obj: Mapping[str, Any]) -> Any:
    return obj["spec"]["domain"]


def annotations(obj: Mapping[str, Any]) -> Any:
    return obj["metadata"].get("annotations", {})


def test_a_matching_preset_fills_in_and_annotates() -> None:
    p = preset("big", cpu={"cores": 4}, resources={"requests": {"memory": "1Gi"}})
    out = apply_presets(vmi(), [p])
    assert domain(out.vmi)["cpu"] == {"cores": 4}
    assert domain(out.vmi)["resources"] == {"requests": {"memory": "1Gi"}}
    assert annotations(out.vmi) == {"virtualmachinepreset.kubevirt.io/big": "kubevirt.io/v1"}
    assert out.applied == ("big",)


def test_every_section_upstream_merges() -> None:
    sections: dict[str, Any] = {
        "firmware": {"serial": "s-1"},
        "features": {"acpi": {}},
        "ioThreadsPolicy": "shared",
        "clock": {"utc": {}, "timer": {"hpet": {"present": False}}},
        "devices": {"watchdog": {"name": "w", "i6300esb": {"action": "poweroff"}}},
    }
    out = apply_presets(vmi(), [preset("all", **sections)])
    for key, value in sections.items():
        assert domain(out.vmi)[key] == value


def test_machine_and_other_devices_are_not_merged() -> None:
    p = preset("m", machine={"type": "q35"}, devices={"disks": [{"name": "d"}]}, cpu={"cores": 1})
    out = apply_presets(vmi(), [p])
    assert "machine" not in domain(out.vmi)
    assert domain(out.vmi)["devices"] == {}


def test_selector_expressions_and_non_matching_vmis() -> None:
    p = preset(
        "exp",
        {"matchExpressions": [{"key": "flavor", "operator": "In", "values": ["big", "huge"]}]},
        cpu={"cores": 2},
    )
    assert apply_presets(vmi({"flavor": "huge"}), [p]).applied == ("exp",)
    untouched = apply_presets(vmi({"flavor": "small"}), [p])
    assert untouched.applied == ()
    assert "cpu" not in domain(untouched.vmi)
    assert annotations(untouched.vmi) == {}


def test_an_empty_selector_matches_every_vmi() -> None:
    assert apply_presets(vmi({}), [preset("all", {}, cpu={"cores": 2})]).applied == ("all",)


def test_the_exclusion_annotation_keeps_presets_away() -> None:
    excluded = vmi()
    excluded["metadata"]["annotations"] = {EXCLUDE_ANNOTATION: "true"}
    out = apply_presets(excluded, [preset("big", cpu={"cores": 4})])
    assert "cpu" not in domain(out.vmi)
    assert annotations(out.vmi) == {EXCLUDE_ANNOTATION: "true"}


def test_the_vmi_wins_a_conflict_and_the_preset_is_not_annotated() -> None:
    out = apply_presets(vmi(cpu={"cores": 1}), [preset("big", cpu={"cores": 4})])
    assert domain(out.vmi)["cpu"] == {"cores": 1}
    assert out.applied == ()
    assert annotations(out.vmi) == {}


def test_a_partly_conflicting_preset_applies_the_rest_and_is_annotated() -> None:
    p = preset("big", cpu={"cores": 4}, firmware={"serial": "x"})
    out = apply_presets(vmi(cpu={"cores": 1}), [p])
    assert domain(out.vmi)["cpu"] == {"cores": 1}
    assert domain(out.vmi)["firmware"] == {"serial": "x"}
    assert out.applied == ("big",)


def test_requests_merge_only_into_a_vmi_without_requests() -> None:
    p = preset("mem", resources={"requests": {"memory": "128Mi"}})
    out = apply_presets(vmi(resources={"requests": {"cpu": "1"}}), [p])
    # As upstream: no common key (no conflict), nothing merged, nothing equal: not applied.
    assert domain(out.vmi)["resources"] == {"requests": {"cpu": "1"}}
    assert out.applied == ()
    same = apply_presets(vmi(resources={"requests": {"memory": "0.125Gi"}}), [p])
    assert same.applied == ("mem",)


def test_presets_that_conflict_with_each_other_refuse_the_vmi() -> None:
    presets = [preset("a", cpu={"cores": 2}), preset("b", cpu={"cores": 4})]
    with pytest.raises(PresetError) as error:
        apply_presets(vmi(), presets)
    assert str(error.value) == (
        "VirtualMachinePresets cannot be applied due to conflicts: presets 'b' and 'a' "
        'conflict: spec.cpu: {"cores":4} != {"cores":2}'
    )


def test_presets_that_agree_all_apply() -> None:
    presets = [preset("a", cpu={"cores": 2}), preset("b", cpu={"cores": 2}, firmware={})]
    out = apply_presets(vmi(), presets)
    assert out.applied == ("a", "b")
    assert set(annotations(out.vmi)) == {annotation_key("a"), annotation_key("b")}


def test_an_invalid_selector_refuses_the_vmi() -> None:
    bad = preset("bad", {"matchExpressions": [{"key": "k", "operator": "Near"}]})
    with pytest.raises(PresetError, match="preset 'bad'"):
        apply_presets(vmi(), [bad])


# -- through the VMI mutating webhook ------------------------------------------------------


Mutate = Callable[..., Awaitable[dict[str, Any]]]


@pytest.fixture
def mutate(admission: Callable[[], AdmissionContext], fake_api: Any, no_handler: Any) -> Mutate:
    """POST a VMI review to the mutating webhook whose preset source holds `presets`."""

    async def run(
        presets: Sequence[Mapping[str, Any]], obj: Mapping[str, Any], operation: str = "CREATE"
    ) -> dict[str, Any]:
        asked: list[str] = []

        async def source(namespace: str) -> Sequence[Mapping[str, Any]]:
            asked.append(namespace)
            return presets

        ctx = replace(admission(), presets=source)
        app = build_app(ctx, SubresourceContext(fake_api.client, FrontProxyConfig(), no_handler))
        request = {
            "uid": "uid-1",
            "kind": {"group": "kubevirt.io", "version": "v1", "kind": "VirtualMachineInstance"},
            "resource": {
                "group": "kubevirt.io",
                "version": "v1",
                "resource": "virtualmachineinstances",
            },
            "operation": operation,
            "namespace": "ns",
            "object": obj,
            "oldObject": obj if operation == "UPDATE" else None,
            "userInfo": {"username": "alice"},
        }
        body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
        async with TestClient(TestServer(app)) as client:
            response = await client.post("/virtualmachineinstances-mutate", json=body)
            result: dict[str, Any] = await response.json()
        assert asked == (["ns"] if operation == "CREATE" else [])
        return result

    return run


def patched(obj: Mapping[str, Any], body: Mapping[str, Any]) -> Any:
    """`obj` after the webhook's JSONPatch (adds and replaces suffice for defaulting)."""
    out = json.loads(json.dumps(obj))
    for op in json.loads(base64.b64decode(body["response"]["patch"])):
        *parents, last = [
            p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]
        ]
        target = out
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        if op["op"] == "remove":
            del target[last]
        else:
            target[last] = op["value"]
    return out


async def test_the_webhook_patches_preset_values_and_warns(mutate: Mutate) -> None:
    body = await mutate([preset("big", cpu={"cores": 4})], vmi())
    out = patched(vmi(), body)
    assert annotations(out)[annotation_key("big")] == "kubevirt.io/v1"
    assert domain(out)["cpu"]["cores"] == 4  # the defaults may fill in sockets and threads
    assert body["response"]["warnings"] == [DEPRECATION_WARNING]


async def test_the_vmi_keeps_its_own_values_through_the_webhook(mutate: Mutate) -> None:
    body = await mutate([preset("big", cpu={"cores": 4})], vmi(cpu={"cores": 1}))
    out = patched(vmi(cpu={"cores": 1}), body)
    assert domain(out)["cpu"]["cores"] == 1
    assert annotation_key("big") not in annotations(out)
    assert "warnings" not in body["response"]


async def test_the_webhook_refuses_conflicting_presets_with_422(mutate: Mutate) -> None:
    body = await mutate([preset("a", cpu={"cores": 2}), preset("b", cpu={"cores": 4})], vmi())
    status = body["response"]["status"]
    assert body["response"]["allowed"] is False
    assert status["code"] == 422
    assert "presets 'b' and 'a' conflict" in status["message"]


async def test_updates_never_get_presets_nor_the_warning(mutate: Mutate) -> None:
    annotated = vmi()
    annotated["metadata"]["annotations"] = {annotation_key("big"): "kubevirt.io/v1"}
    body = await mutate([preset("big", cpu={"cores": 4})], annotated, operation="UPDATE")
    assert body["response"]["allowed"] is True
    assert "patch" not in body["response"]
    assert "warnings" not in body["response"]


class ListingApi:
    """The one call ApiPresets makes, answered or refused."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.asked: list[tuple[str, str | None]] = []

    async def list(self, resource: Any, namespace: str | None = None) -> Any:
        self.asked.append((resource.plural, namespace))
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


async def test_presets_are_listed_per_namespace() -> None:
    api = ListingApi({"items": [preset("big"), "junk"]})
    found = await ApiPresets(cast(KubeClient, api))("ns")
    assert [p["metadata"]["name"] for p in found] == ["big"]
    assert api.asked == [("virtualmachineinstancepresets", "ns")]


async def test_an_unreadable_preset_list_refuses_the_vmi() -> None:
    api = ListingApi(ApiError(403, "Forbidden", "cannot list virtualmachineinstancepresets"))
    with pytest.raises(PresetError, match="cannot read the VirtualMachineInstancePresets"):
        await ApiPresets(cast(KubeClient, api))("ns")


def test_an_empty_requests_map_is_not_filled() -> None:
    p = preset("mem", resources={"requests": {"memory": "128Mi"}})
    out = apply_presets(vmi(resources={"requests": {}}), [p])
    assert domain(out.vmi)["resources"] == {"requests": {}}
    assert out.applied == ()
