"""A VMI being deleted gets its guest shut down once (sent again until it lands); a VMI
gone is let go."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import grpclib
from grpclib.const import Status

if TYPE_CHECKING:
    from conftest import Node


async def test_a_deleted_vmi_asks_the_launcher_to_shut_down_once(node: Node) -> None:
    await node.guest_running()
    deleting = node.applied()
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:01:00Z"
    node.put_vmi(deleting)
    patches = len(node.client.patches)

    for _ in range(3):  # every event on the VMI reconciles it again
        assert await node.sync.reconcile(node.key) is None

    assert node.launcher.calls.count("Shutdown") == 1
    # The kill after the grace period is the launcher's own (it holds the grace period).
    assert "Kill" not in node.launcher.calls
    assert len(node.client.patches) == patches  # the status of a VMI going away is not ours


async def test_a_vmi_deleted_before_its_launcher_was_reached_sends_nothing(node: Node) -> None:
    vmi = node.vmi_body("Scheduled")
    vmi["metadata"]["deletionTimestamp"] = "2026-01-01T00:01:00Z"
    node.put_vmi(vmi)
    node.put_pod(node.pod_body("Running"))
    await node.start_launcher()

    assert await node.sync.reconcile(node.key) is None

    assert node.launcher.calls == []


async def test_a_vmi_gone_from_the_informer_closes_its_connection(node: Node) -> None:
    await node.guest_running()
    record = node.sync.records[node.vmi_uid]
    assert record.notify is not None
    assert record.notify.serving

    node.vmis.store.delete(node.vmi_body())
    assert await node.sync.reconcile(node.key) is None

    assert node.vmi_uid not in node.sync.records
    assert not record.notify.serving


def _deleting(node: Node) -> dict[str, Any]:
    body = node.applied()
    body["metadata"]["deletionTimestamp"] = "2026-01-01T00:01:00Z"
    return body


async def test_a_shutdown_that_did_not_reach_the_launcher_is_sent_again(node: Node) -> None:
    await node.guest_running()
    node.launcher.shutdown_errors.append(grpclib.GRPCError(Status.UNAVAILABLE, "connection lost"))
    node.put_vmi(_deleting(node))

    again = await node.sync.reconcile(node.key)
    assert again is not None
    assert again.requeue_after is not None
    assert await node.sync.reconcile(node.key) is None

    assert node.launcher.calls.count("Shutdown") == 2
    assert node.client.reasons().count("ShuttingDown") == 1


async def test_a_shutdown_the_launcher_refused_is_not_repeated(node: Node) -> None:
    await node.guest_running()
    node.launcher.shutdown_errors.append(
        grpclib.GRPCError(Status.FAILED_PRECONDITION, "the domain is paused")
    )
    node.put_vmi(_deleting(node))

    for _ in range(3):
        assert await node.sync.reconcile(node.key) is None

    assert node.launcher.calls.count("Shutdown") == 1


async def test_a_vmi_deleted_while_its_connection_was_down_reconnects_to_shut_down(
    node: Node,
) -> None:
    await node.guest_running()
    record = node.sync.records[node.vmi_uid]
    assert record.conn is not None
    record.conn.close()
    record.conn = None  # as after a sync that found the launcher unreachable
    node.put_vmi(_deleting(node))

    assert await node.sync.reconcile(node.key) is None

    assert node.launcher.calls.count("Shutdown") == 1
    assert "ShuttingDown" in node.client.reasons()
