"""A filesystem-mode PVC volume: the launcher creates its disk.img, the guest writes to it,
and a later launcher with the same volume keeps the image and the guest reads it back.

The claim is mounted as kubelet mounts it in the launcher pod (a directory at
`<private>/vmi-disks/<volume>/`, world-writable as local-path-provisioner makes it); its
size comes from the VMI's status.volumeStatus, as virt-controller reports it. The launcher
runs as uid 107 (its image's user), so the image it creates is qemu's.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from virt_rpc import DomainState, GetDomainRequest, SyncOptions, SyncVirtualMachineRequest

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

SIZE = 16 << 20
QEMU_UID = 107


def _vmi(launcher: Any) -> dict[str, Any]:
    body = launcher.vmi()
    spec = body["spec"]
    spec["domain"]["devices"]["disks"] = [{"name": "data", "disk": {"bus": "virtio"}}]
    spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "data-claim"}}]
    body["status"] = {
        "volumeStatus": [
            {
                "name": "data",
                "target": "",
                "persistentVolumeClaimInfo": {
                    "claimName": "data-claim",
                    "accessModes": ["ReadWriteOnce"],
                    "volumeMode": "Filesystem",
                    "capacity": {"storage": "16Mi"},
                    "filesystemOverhead": "0.055",
                },
            }
        ]
    }
    return body


def _mount_claim(launcher: Any) -> Path:
    directory = launcher.private_dir / "vmi-disks" / "data"
    directory.mkdir(parents=True)
    directory.chmod(0o777)
    return directory


async def _type(socket: Path, command: str, within: float = 60.0) -> str:
    """Type `command` into the guest's serial shell; its output up to a done marker."""
    token = secrets.token_hex(3)
    reader, writer = await asyncio.open_unix_connection(str(socket))
    seen = b""
    try:
        writer.write(f"\n{command}; echo DONE-{token}-$((1+1))\n".encode())
        await writer.drain()
        done = f"DONE-{token}-2".encode()
        async with asyncio.timeout(within):
            while done not in seen:
                chunk = await reader.read(4096)
                if not chunk:
                    pytest.fail(f"serial console closed: {seen[-500:]!r}")
                seen += chunk
    finally:
        writer.close()
    return seen.decode(errors="replace")


def _request(launcher: Any) -> SyncVirtualMachineRequest:
    return SyncVirtualMachineRequest(
        vmi=launcher.ref,
        vmi_json=json.dumps(_vmi(launcher)),
        options=SyncOptions(use_emulation=True),
    )


async def test_a_claims_disk_img_is_made_once_and_keeps_the_guests_data(
    launcher_control: tuple[Callable[..., Any], Callable[..., Any]],
    serial_reader: Callable[..., Any],
    agent_guest: Any,
) -> None:
    start, stop = launcher_control
    first = await start(guest=agent_guest, unprivileged=True)
    directory = await asyncio.to_thread(_mount_claim, first)
    image = directory / "disk.img"

    reply = await first.cmd.sync_virtual_machine(_request(first))
    assert reply.domain.state == DomainState.RUNNING
    made = await asyncio.to_thread(os.stat, image)
    assert (made.st_uid, made.st_size) == (QEMU_UID, SIZE)
    assert made.st_blocks * 512 < SIZE  # sparse, as upstream's createSparseRaw
    domain = await first.cmd.get_domain(GetDomainRequest())
    assert f"<source file='{image}'" in domain.domain.domain_xml
    await serial_reader(first.serial_socket, agent_guest.marker)

    line = f"KVPY-CLAIM-{secrets.token_hex(4)}"
    await _type(first.serial_socket, f"echo {line} > /dev/vda && sync")
    await stop(first)
    head = await asyncio.to_thread(lambda: image.read_bytes()[: len(line)])
    assert head.decode() == line

    # The same volume in a new launcher pod: its disk.img is the guest's data, kept.
    second = await start(guest=agent_guest, unprivileged=True)
    again = await asyncio.to_thread(_mount_claim, second)
    await asyncio.to_thread(shutil.copy2, image, again / "disk.img")
    await asyncio.to_thread(os.chown, again / "disk.img", QEMU_UID, QEMU_UID)
    reply = await second.cmd.sync_virtual_machine(_request(second))
    assert reply.domain.state == DomainState.RUNNING
    await serial_reader(second.serial_socket, agent_guest.marker)
    read = await _type(second.serial_socket, f"head -c {len(line)} /dev/vda; echo")
    assert line in read.rpartition("head -c")[2]
    await stop(second)
