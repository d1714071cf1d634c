"""SIGTERM stops the launcher gracefully: ACPI power-off first, then a clean exit, and the
domain's last report says its pod was being stopped (the handler fails a VMI stopped so)."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable
from typing import Any

import pytest
from virt_rpc import (
    DomainEvent,
    DomainEventType,
    DomainReason,
    DomainState,
    SyncOptions,
    SyncVirtualMachineRequest,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


def _leftovers(base: str) -> list[str]:
    """Processes whose command line still names the launcher's directory."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if base in cmdline:
            found.append(f"{pid}: {cmdline[:120]}")
    return found


async def test_sigterm_powers_the_guest_off_and_exits_cleanly(
    launcher_control: tuple[Callable[..., Any], Callable[..., Any]],
    serial_reader: Callable[..., Any],
    tiny_guest: Any,
) -> None:
    start, _stop = launcher_control
    launcher = await start(grace_period=60)
    await launcher.cmd.sync_virtual_machine(
        SyncVirtualMachineRequest(
            vmi=launcher.ref,
            vmi_json=launcher.vmi_json(terminationGracePeriodSeconds=60),
            options=SyncOptions(use_emulation=True),
        )
    )
    await serial_reader(launcher.serial_socket, tiny_guest.marker)

    launcher.process.send_signal(signal.SIGTERM)
    code = await asyncio.wait_for(launcher.process.wait(), 120)

    assert code == 0, await asyncio.to_thread(launcher.log.read_text)
    stops = []
    while not launcher.notify.items.empty():
        item = launcher.notify.items.get_nowait()
        if (
            isinstance(item, DomainEvent)
            and item.type == DomainEventType.MODIFIED
            and item.domain.state == DomainState.SHUTOFF
        ):
            stops.append((item.domain.reason, item.domain.pod_stopping))
    assert stops == [(DomainReason.GUEST_SHUTDOWN, True)]
    sockets = await asyncio.to_thread(os.listdir, launcher.sockets_dir)
    assert sockets == []
    assert await asyncio.to_thread(_leftovers, str(launcher.base)) == []
