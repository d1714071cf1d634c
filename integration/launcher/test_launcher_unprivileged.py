"""The launcher runs as an unprivileged user, as in its image: libvirtd inherits that uid."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from virt_rpc import DomainState, SyncOptions, SyncVirtualMachineRequest

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


def _owners(base: str) -> dict[str, int]:
    """uid of every process whose command line names the launcher's directory."""
    owners = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            uid = os.stat(f"/proc/{pid}").st_uid
        except (OSError, UnicodeDecodeError):
            continue
        if base in cmdline:
            owners[cmdline.split()[0].rsplit("/", 1)[-1] + f"[{pid}]"] = uid
    return owners


async def test_an_unprivileged_launcher_boots_and_stops_the_guest(
    launcher_control: tuple[Callable[..., Any], Callable[..., Any]],
    launcher_user: tuple[int, int] | None,
    serial_reader: Callable[..., Any],
    tiny_guest: Any,
) -> None:
    start, _stop = launcher_control
    launcher = await start(unprivileged=True)
    assert launcher_user is not None

    reply = await launcher.cmd.sync_virtual_machine(
        SyncVirtualMachineRequest(
            vmi=launcher.ref,
            vmi_json=launcher.vmi_json(),
            options=SyncOptions(use_emulation=True),
        )
    )
    assert reply.domain.state == DomainState.RUNNING
    await serial_reader(launcher.serial_socket, tiny_guest.marker)

    # The launcher, libvirtd and QEMU all run as the launcher's user, never as root.
    owners = await asyncio.to_thread(_owners, str(launcher.base))
    assert any(name.startswith("libvirtd") for name in owners), owners
    assert any(name.startswith("qemu-system") for name in owners), owners
    assert set(owners.values()) == {launcher_user[0]}, owners

    launcher.process.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(launcher.process.wait(), 120) == 0
