"""status.interfaces: the domain's NICs with the pod's IPs, the pod-network one first."""

from __future__ import annotations

from typing import Any

from kube_runtime import freeze
from virt_domain.podnetwork import Binding, DhcpLease, PodNetwork
from virt_handler import DomainView, Observation, compute_status
from virt_rpc import DomainState

NOW = "2026-11-29T22:00:00Z"
POD = PodNetwork(
    "default",
    Binding.MASQUERADE,
    "tap1",
    "k6t-eth0",
    "0a:58:0a:f4:00:05",
    1450,
    DhcpLease("10.0.2.1", "10.0.2.2", 24, "10.0.2.1"),
    ("10.244.0.5", "fd00::5"),
)
NICS = (("storage", "02:00:00:00:00:01"), ("default", "0a:58:0a:f4:00:05"))


def _running(**status: Any) -> dict[str, Any]:
    return {"metadata": {"name": "v"}, "status": {"phase": "Running", "nodeName": "n", **status}}


def _obs(networks: Any, nics: Any = NICS) -> Observation:
    return Observation(
        node="n",
        domain=DomainView(DomainState.RUNNING, interfaces=nics),
        now=NOW,
        networks=networks,
    )


def test_the_pod_ip_is_the_vmis_ip_and_the_primary_comes_first() -> None:
    patch = compute_status(_running(), _obs((POD,)))
    assert patch["interfaces"] == [
        {
            "name": "default",
            "mac": "0a:58:0a:f4:00:05",
            "infoSource": "domain",
            "podInterfaceName": "eth0",
            "ipAddress": "10.244.0.5",  # what `kubectl get vmi` prints in its IP column
            "ipAddresses": ["10.244.0.5", "fd00::5"],
        },
        {"name": "storage", "mac": "02:00:00:00:00:01", "infoSource": "domain"},
    ]
    # Written once: the same observation on the patched VMI, read back from the informer's
    # cache (read-only: its lists are tuples), changes nothing.
    settled = freeze(_running(**patch))
    assert compute_status(settled, _obs((POD,))) == {}


def test_a_restarted_handler_keeps_the_ips_until_it_knows_the_pod_again() -> None:
    known = compute_status(_running(), _obs((POD,)))["interfaces"]
    vmi = _running(interfaces=known)
    assert "interfaces" not in compute_status(vmi, _obs(None))


def _bridge_vmi(
    phase: str, annotations: dict[str, str] | None = None, **status: Any
) -> dict[str, Any]:
    return {
        "metadata": {"name": "v", "annotations": annotations or {}},
        "spec": {
            "domain": {"devices": {"interfaces": [{"name": "default", "bridge": {}}]}},
            "networks": [{"name": "default", "pod": {}}],
        },
        "status": {"phase": phase, **status},
    }


def _migratable(patch: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in patch.get("conditions", ()) if c["type"] == "LiveMigratable"]


def test_bridge_binding_on_the_pod_network_is_not_live_migratable() -> None:
    (cond,) = _migratable(compute_status(_bridge_vmi("Scheduled"), _obs(None, ())))
    assert (cond["status"], cond["reason"]) == ("False", "InterfaceNotLiveMigratable")
    assert "masquerade" in cond["message"]


def test_the_annotation_allows_it_and_lifts_our_condition() -> None:
    allowed = {"kubevirt.io/allow-pod-bridge-network-live-migration": ""}
    ours = {"type": "LiveMigratable", "status": "False", "reason": "InterfaceNotLiveMigratable"}
    patch = compute_status(_bridge_vmi("Scheduled", allowed, conditions=[ours]), _obs(None, ()))
    (cond,) = _migratable(patch)
    assert cond["status"] == "True"
    assert "reason" not in cond
    # Before its guest runs, a migratable VMI gets no condition yet; a lifted refusal goes.
    vmi = _bridge_vmi("Scheduled", allowed, conditions=[ours])
    vmi["spec"]["domain"]["devices"]["interfaces"] = [{"name": "default", "masquerade": {}}]
    not_yet = compute_status(vmi, Observation(node="n", now=NOW))
    assert _migratable(not_yet) == []
    assert not_yet["conditions"] == []
