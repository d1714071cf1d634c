"""A ready launcher gets the VMI once; the VMI turns Running, and is not written again."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from kube_runtime import ApiError
from virt_handler.vmi_sync import SyncSettings, converter_options
from virt_rpc import DomainReason, DomainState, options_from_wire

if TYPE_CHECKING:
    from conftest import Node


async def test_the_launcher_gets_the_vmi_and_the_handlers_converter_options(node: Node) -> None:
    await node.launcher_ready()

    await node.sync.reconcile(node.key)

    (request,) = node.launcher.syncs
    assert request.vmi is not None
    assert (request.vmi.namespace, request.vmi.name, request.vmi.uid) == (
        "ns",
        "vm",
        node.vmi_uid,
    )
    assert json.loads(request.vmi_json)["spec"] == node.vmi_body()["spec"]
    assert options_from_wire(request.options) == converter_options(use_emulation=False)
    assert node.network_setups == [node.pod_uid]  # the taps come before the domain


async def test_a_running_domain_makes_the_vmi_running_in_one_guarded_patch(node: Node) -> None:
    await node.launcher_ready()

    await node.sync.reconcile(node.key)

    ((plural, name, body),) = node.client.patches
    assert (plural, name) == ("virtualmachineinstances", "vm")
    assert body["metadata"] == {"resourceVersion": "7"}  # computed from that version only
    status = body["status"]
    assert status["phase"] == "Running"
    assert status["phaseTransitionTimestamps"] == [
        {"phase": "Running", "phaseTransitionTimestamp": "2026-01-01T00:00:00Z"}
    ]
    assert [(c["type"], c["status"]) for c in status["conditions"]] == [
        ("Ready", "True"),
        ("LiveMigratable", "True"),
    ]
    assert status["migrationMethod"] == "LiveMigration"
    assert status["launcherContainerImageVersion"] == node.image


async def test_nothing_is_written_or_synced_again_once_the_status_says_it(node: Node) -> None:
    await node.launcher_ready()
    await node.sync.reconcile(node.key)
    node.put_vmi(node.applied())  # the informer shows our own patch

    for _ in range(3):
        await node.sync.reconcile(node.key)

    assert len(node.client.patches) == 1
    assert node.launcher.calls.count("SyncVirtualMachine") == 1
    assert node.launcher.calls.count("GetDomain") == 1  # once per connection, then Notify


async def test_a_guest_already_running_after_a_handler_restart_is_adopted_not_synced(
    node: Node,
) -> None:
    await node.launcher_ready()
    node.launcher.state, node.launcher.reason = DomainState.RUNNING, DomainReason.BOOTED

    await node.sync.reconcile(node.key)

    assert "SyncVirtualMachine" not in node.launcher.calls
    assert node.client.status_patches()[0]["phase"] == "Running"


async def test_a_conflicting_write_is_recomputed_soon(node: Node) -> None:
    await node.launcher_ready()
    node.client.fail_next_patch.append(ApiError(409, "Conflict", "the object has been modified"))

    await node.sync.reconcile(node.key)

    assert node.client.patches == []
    assert node.queue.delayed == 1
    await node.clock.advance(0.2)
    assert len(node.queue) == 1


async def test_a_launcher_saying_hello_is_synced_without_waiting_for_the_next_look(
    node: Node,
) -> None:
    # The pod runs but its launcher is not ready: the handler serves Notify, looks later.
    node.put_vmi(node.vmi_body("Scheduled"))
    node.put_pod(node.pod_body("Running"))
    node.sockets_dir()
    result = await node.sync.reconcile(node.key)
    assert node.launcher.syncs == []
    assert result is not None
    assert result.requeue_after == SyncSettings.waiting_resync
    assert len(node.queue) == 0

    await node.start_launcher()
    await node.hello()

    assert len(node.queue) == 1  # now, not at the delayed look
    await node.sync.reconcile(node.key)
    assert len(node.launcher.syncs) == 1
