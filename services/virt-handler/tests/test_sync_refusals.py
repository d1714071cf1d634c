"""A launcher refusing the VMI, or a socket we refuse, yields one event and no hot loop."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import grpclib
from grpclib.const import Status
from kube_runtime import Result
from virt_handler.podfiles import LAUNCHER_SOCKET

if TYPE_CHECKING:
    from conftest import Node

BAD_DISK = "spec.domain.devices.disks[0].name: no volume named 'root' (valid: 'data')"


async def _refused(node: Node, message: str = BAD_DISK) -> None:
    node.launcher.sync_error = grpclib.GRPCError(Status.INVALID_ARGUMENT, message)
    await node.launcher_ready()


async def test_an_invalid_argument_becomes_one_event_naming_the_field(node: Node) -> None:
    await _refused(node)

    assert await node.sync.reconcile(node.key) == Result(requeue_after=10.0)

    (event,) = node.client.events
    assert (event["type"], event["reason"], event["message"]) == ("Warning", "SyncFailed", BAD_DISK)
    assert event["involvedObject"]["uid"] == node.vmi_uid
    assert all(patch.get("phase") != "Running" for patch in node.client.status_patches())


async def test_a_refused_sync_backs_off_on_the_injected_clock(node: Node) -> None:
    await _refused(node)
    await node.sync.reconcile(node.key)  # first try at t=0: next one not before t=1

    await node.sync.reconcile(node.key)  # a domain event or resync right after
    assert node.launcher.calls.count("SyncVirtualMachine") == 1
    await node.clock.advance(1.0)
    await node.sync.reconcile(node.key)
    assert node.launcher.calls.count("SyncVirtualMachine") == 2
    await node.clock.advance(1.0)  # the back-off doubled to 2 s
    await node.sync.reconcile(node.key)
    assert node.launcher.calls.count("SyncVirtualMachine") == 2
    await node.clock.advance(1.0)
    await node.sync.reconcile(node.key)
    assert node.launcher.calls.count("SyncVirtualMachine") == 3

    assert node.client.reasons() == ["SyncFailed"]  # the same error is not repeated


async def test_the_back_off_stops_growing_at_30_seconds(node: Node) -> None:
    await _refused(node)
    for _ in range(10):
        await node.sync.reconcile(node.key)
        await node.clock.advance(30.0)
    syncs = node.launcher.calls.count("SyncVirtualMachine")

    await node.clock.advance(30.0)
    await node.sync.reconcile(node.key)

    assert node.launcher.calls.count("SyncVirtualMachine") == syncs + 1


async def test_a_new_error_is_a_new_event_and_success_resets_the_back_off(node: Node) -> None:
    await _refused(node)
    await node.sync.reconcile(node.key)
    node.launcher.sync_error = grpclib.GRPCError(Status.INVALID_ARGUMENT, "spec.x: bad")
    await node.clock.advance(1.0)
    await node.sync.reconcile(node.key)
    assert [e["message"] for e in node.client.events] == [BAD_DISK, "spec.x: bad"]

    node.launcher.sync_error = None
    await node.clock.advance(2.0)
    await node.sync.reconcile(node.key)

    assert node.client.status_patches()[-1]["phase"] == "Running"
    assert node.sync.records[node.vmi_uid].sync_backoff == 0.0


async def test_a_symlink_planted_as_the_launcher_socket_is_refused_with_one_event(
    node: Node, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    await node.start_launcher(at=elsewhere)  # a real, answering launcher, outside the pod
    (node.sockets_dir() / LAUNCHER_SOCKET).symlink_to(elsewhere / LAUNCHER_SOCKET)
    node.put_vmi(node.vmi_body("Scheduled"))
    node.put_pod(node.pod_body("Running"))

    for _ in range(3):
        assert await node.sync.reconcile(node.key) == Result(requeue_after=10.0)

    assert node.launcher.calls == []  # never reached through the link
    assert node.client.reasons() == ["LauncherRefused"]
    assert "symlink" in node.client.events[0]["message"]
