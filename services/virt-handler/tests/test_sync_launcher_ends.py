"""When the launcher pod finishes, the VMI ends: Succeeded or Failed, as its guest ended."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from virt_rpc import DomainReason, DomainState

if TYPE_CHECKING:
    from conftest import Node


def _last_status(node: Node) -> dict[str, Any]:
    return node.client.status_patches()[-1]


async def test_a_guest_that_shut_down_then_its_pod_finished_succeeds(node: Node) -> None:
    await node.guest_running()
    # The launcher reports the guest's own power-off, then exits.
    await node.notify(DomainState.SHUTOFF, DomainReason.GUEST_SHUTDOWN)
    assert len(node.queue) == 1  # the event queued the VMI
    node.put_pod(node.pod_body("Succeeded"))

    assert await node.sync.reconcile(node.key) is None  # nothing left to look at

    status = _last_status(node)
    assert status["phase"] == "Succeeded"
    ready = [c for c in status["conditions"] if c["type"] == "Ready"]
    # Upstream's rule: the pod is down, so the reason says so (not GuestNotRunning).
    assert [(c["status"], c.get("reason")) for c in ready] == [("False", "PodTerminating")]


async def test_a_guest_shut_down_because_its_pod_was_stopped_fails_the_vmi(node: Node) -> None:
    # A kubelet that rejects the pod on restart, an eviction, `kubectl delete pod`: the
    # launcher powers the guest off cleanly, but nobody stopped the VMI, so
    # RerunOnFailure must start it again; upstream would call it Succeeded.
    await node.guest_running()
    await node.notify(DomainState.SHUTOFF, DomainReason.GUEST_SHUTDOWN, pod_stopping=True)
    node.put_pod(node.pod_body("Failed"))

    assert await node.sync.reconcile(node.key) is None

    status = _last_status(node)
    assert (status["phase"], status["reason"]) == ("Failed", "PodStopped")
    stopped = [e for e in node.client.events if e["reason"] == "Stopped"]
    assert [(e["type"], e["message"]) for e in stopped] == [
        ("Warning", "The VirtualMachineInstance's pod was stopped while it ran.")
    ]


async def test_a_crashed_guest_fails_the_vmi(node: Node) -> None:
    await node.guest_running()
    await node.notify(DomainState.CRASHED, DomainReason.CRASHED)
    node.put_pod(
        node.pod_body(
            "Running",
            containerStatuses=[{"name": "compute", "state": {"terminated": {"exitCode": 1}}}],
        )
    )

    await node.sync.reconcile(node.key)

    status = _last_status(node)
    assert status["phase"] == "Failed"
    assert status["reason"] == "DomainFailed"


async def test_a_launcher_pod_gone_before_any_domain_fails_the_vmi(node: Node) -> None:
    node.put_vmi(node.vmi_body("Running"))
    node.put_pod(node.pod_body("Failed"))

    assert await node.sync.reconcile(node.key) is None

    status = _last_status(node)
    assert status["phase"] == "Failed"
    assert status["reason"] == "LauncherFailed"
    assert node.launcher.calls == []


async def test_a_finished_vmi_is_let_go(node: Node) -> None:
    await node.guest_running()
    final = node.applied()
    final["status"]["phase"] = "Succeeded"
    node.put_vmi(final)
    before = len(node.client.patches)

    assert await node.sync.reconcile(node.key) is None

    assert node.vmi_uid not in node.sync.records  # connection and Notify server closed
    assert len(node.client.patches) == before


async def test_a_launcher_pod_that_failed_under_a_running_guest_is_left_to_virt_controller(
    node: Node,
) -> None:
    # The handler's last word from the launcher was "running", so it does not guess;
    # virt-controller fails the VMI from the pod's phase (PodFailed).
    await node.guest_running()
    node.put_pod(node.pod_body("Failed"))

    assert await node.sync.reconcile(node.key) is None  # no requeue: nothing to reach

    assert len(node.client.patches) == 1
    assert node.sync.records[node.vmi_uid].conn is None  # the channel is closed
