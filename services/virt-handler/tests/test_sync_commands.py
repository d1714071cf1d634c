"""Commands from virt-api reach the VMI's launcher; refusals become HTTP statuses."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from virt_handler.vmi_sync import CommandError

if TYPE_CHECKING:
    from conftest import Node


async def test_pause_reaches_the_launcher_and_the_status_follows(node: Node) -> None:
    await node.guest_running()

    await node.sync.command("ns", "vm", "pause")

    assert node.launcher.calls[-1] == "Pause"
    assert len(node.queue) == 1  # the VMI is looked at again with the launcher's answer
    await node.sync.reconcile(node.key)
    paused = node.client.status_patches()[-1]["conditions"]
    # Ready follows the pod: virt-controller flips its readiness gate, then Ready.
    assert {c["type"]: c["status"] for c in paused} == {
        "Ready": "True",
        "Paused": "True",
        "LiveMigratable": "True",
    }


async def test_a_launcher_refusing_the_state_is_a_conflict(node: Node) -> None:
    await node.guest_running()
    await node.sync.command("ns", "vm", "pause")

    with pytest.raises(CommandError) as refused:
        await node.sync.command("ns", "vm", "pause")
    assert (refused.value.status, refused.value.message) == (409, "the domain is not running")


async def test_commands_for_vmis_not_here_or_not_running(node: Node) -> None:
    with pytest.raises(CommandError) as missing:
        await node.sync.command("ns", "other", "pause")
    assert missing.value.status == 404
    node.put_vmi(node.vmi_body("Scheduled"))
    with pytest.raises(CommandError) as not_running:
        await node.sync.command("ns", "vm", "pause")
    assert not_running.value.status == 409
    with pytest.raises(CommandError) as unknown:
        await node.sync.command("ns", "vm", "explode")
    assert unknown.value.status == 400
    assert node.launcher.calls == []
