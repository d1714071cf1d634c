"""The Events virt-handler records on a VMI as its guest lives: upstream's reasons,
types and messages (Created, Started, Stopped, ShuttingDown, Deleted)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from virt_rpc import DomainReason, DomainState

if TYPE_CHECKING:
    from conftest import Node


def _events(node: Node) -> list[tuple[str, str, str]]:
    return [(e["type"], e["reason"], e["message"]) for e in node.client.events]


async def test_a_started_guest_is_created_then_started(node: Node) -> None:
    await node.guest_running()
    assert _events(node) == [
        ("Normal", "Created", "VirtualMachineInstance defined."),
        ("Normal", "Started", "VirtualMachineInstance started."),
    ]
    await node.sync.reconcile(node.key)  # a settled guest records nothing more
    assert len(_events(node)) == 2


async def test_a_guest_that_powered_off_was_shut_down(node: Node) -> None:
    await node.guest_running()
    await node.notify(DomainState.SHUTOFF, DomainReason.GUEST_SHUTDOWN)
    await node.sync.reconcile(node.key)
    assert _events(node)[-1] == (
        "Normal",
        "Stopped",
        "The VirtualMachineInstance was shut down.",
    )


async def test_a_crashed_guest_is_a_stopped_warning(node: Node) -> None:
    await node.guest_running()
    await node.notify(DomainState.CRASHED, DomainReason.CRASHED)
    await node.sync.reconcile(node.key)
    assert _events(node)[-1] == ("Warning", "Stopped", "The VirtualMachineInstance crashed.")


async def test_a_deleted_vmi_signals_a_graceful_shutdown_once(node: Node) -> None:
    await node.guest_running()
    deleting = node.applied()
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:01:00Z"
    node.put_vmi(deleting)
    for _ in range(3):
        await node.sync.reconcile(node.key)
    shutting = [e for e in _events(node) if e[1] == "ShuttingDown"]
    assert shutting == [("Normal", "ShuttingDown", "Signaled Graceful Shutdown")]


async def test_a_deleted_vmi_without_grace_period_is_stopping(node: Node) -> None:
    await node.guest_running()
    deleting = node.applied()
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:01:00Z"
    deleting["spec"]["terminationGracePeriodSeconds"] = 0
    node.put_vmi(deleting)
    await node.sync.reconcile(node.key)
    assert _events(node)[-1] == ("Normal", "Deleted", "VirtualMachineInstance stopping")


async def test_an_adopted_running_guest_is_not_created_again(node: Node) -> None:
    # A restarted handler finds the guest running: no Created, no Started (no transition).
    node.launcher.state, node.launcher.reason = DomainState.RUNNING, DomainReason.BOOTED
    node.put_vmi(node.vmi_body("Running"))
    node.put_pod(node.pod_body("Running"))
    await node.start_launcher()
    await node.sync.reconcile(node.key)
    assert _events(node) == []
