"""The real guest agent: kv-images' guest runs qemu-ga, the launcher sees it connect.

The guest boots with a cloud-init disk (iso9660 on virtio-blk, mounted by the guest),
so guest-get-fsinfo reports a filesystem on a disk with a bus type; its ext2 RAM disk at
/data is what guest-fsfreeze-freeze freezes. Access credentials with propagationMethod qemuGuestAgent put a
Secret's key into root's authorized_keys and a password into /etc/passwd, and follow the
Secret when kubelet rewrites it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from grpclib import GRPCError
from grpclib.const import Status
from virt_rpc import (
    DomainEvent,
    DomainState,
    FreezeRequest,
    GetDomainRequest,
    GetGuestInfoRequest,
    GuestInfo,
    SyncOptions,
    SyncVirtualMachineRequest,
    VmiRequest,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAgentPropagated test@launcher"
NEW_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAgentRotated test@launcher"
PASSWORD = "s3cret:with spaces"
# Does root's hash in /etc/passwd match PASSWORD? (the guest's mkpasswd, same salt)
_PASSWORD_CHECK = (
    "h=$(awk -F: '$1 == \"root\" { print $2 }' /etc/passwd); s=$(echo \"$h\" | cut -d'$' -f3); "
    f'[ -n "$s" ] && [ "$(printf %s \'{PASSWORD}\' | mkpasswd -m sha512 -S "$s" -P 0)" = '
    '"$h" ] && echo PASSWORD-MATCHES'
)


def _rewrite_secret(volume: Path, files: dict[str, str]) -> None:
    """Update a mounted Secret as kubelet's atomic writer does: a new timestamped dir,
    then ``..data`` swapped to it in one rename. Blocking."""
    stamp = volume / f"..{time.strftime('%Y_%m_%d_%H_%M_%S')}.{secrets.token_hex(4)}"
    stamp.mkdir()
    for key, text in files.items():
        (stamp / key).write_text(text)
        if not (volume / key).is_symlink():
            (volume / key).symlink_to(f"..data/{key}")
    (volume / "..data_tmp").symlink_to(stamp.name)
    os.replace(volume / "..data_tmp", volume / "..data")


async def _in_guest(serial: Path, command: str, within: float = 30.0) -> str:
    """Type ``command`` into the guest's console shell; what it printed."""
    token = secrets.token_hex(3)
    done = f"DONE-{token}-2".encode()
    reader, writer = await asyncio.open_unix_connection(str(serial))
    try:
        writer.write(f"\n{command}; echo DONE-{token}-$((1+1))\n".encode())
        await writer.drain()
        seen = b""
        deadline = time.monotonic() + within
        while done not in seen:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                pytest.fail(f"{command!r} did not finish on the console: {seen[-500:]!r}")
            with contextlib.suppress(TimeoutError):
                seen += await asyncio.wait_for(reader.read(4096), remaining)
    finally:
        writer.close()
    return seen.decode(errors="replace").rpartition(f"DONE-{token}-$((1+1))")[2]


async def _guest_info(
    launcher: Any, ready: Callable[[GuestInfo], bool], within: float
) -> GuestInfo:
    """GetGuestInfo until ``ready`` holds for its answer; fails after ``within`` seconds."""
    deadline = time.monotonic() + within
    while True:
        info = (await launcher.cmd.get_guest_info(GetGuestInfoRequest())).info
        if ready(info):
            return info
        if time.monotonic() > deadline:
            pytest.fail(f"the guest agent did not report as expected within {within}s: {info}")
        await asyncio.sleep(0.5)


async def test_the_agent_connects_reports_and_freezes(
    launcher_control: tuple[Callable[..., Any], Callable[..., Any]],
    serial_reader: Callable[..., Any],
    agent_guest: Any,
) -> None:
    start, _stop = launcher_control
    launcher = await start(guest=agent_guest)
    vmi = launcher.vmi_with_keys("agent-keys", {"qemuGuestAgent": {"users": ["root"]}})
    vmi["spec"]["accessCredentials"].append(
        {
            "userPassword": {
                "source": {"secret": {"secretName": "agent-password"}},
                "propagationMethod": {"qemuGuestAgent": {}},
            }
        }
    )

    # Before the guest runs there is no agent: freezing is refused, the report empty.
    with pytest.raises(GRPCError) as refused:
        await launcher.cmd.freeze(FreezeRequest(vmi=launcher.ref))
    assert refused.value.status is Status.FAILED_PRECONDITION
    assert "guest agent is not connected" in str(refused.value.message)

    await asyncio.to_thread(launcher.mount_access_secret, "agent-keys", {"key1": KEY + "\n"})
    await asyncio.to_thread(launcher.mount_access_secret, "agent-password", {"root": PASSWORD})
    reply = await launcher.cmd.sync_virtual_machine(
        SyncVirtualMachineRequest(
            vmi=launcher.ref, vmi_json=json.dumps(vmi), options=SyncOptions(use_emulation=True)
        )
    )
    assert reply.domain.state == DomainState.RUNNING
    console = await serial_reader(launcher.serial_socket, agent_guest.marker)
    assert "KUBEVIRT-PY-GUEST-AGENT /dev/vport" in console

    # libvirt's agent lifecycle event starts the poller; the first polls are immediate.
    event, _ = await launcher.notify.expect(
        lambda item: (
            isinstance(item, DomainEvent)
            and item.domain is not None
            and item.domain.guest is not None
            and item.domain.guest.agent_connected
            and bool(item.domain.guest.agent_version)
        ),
        within=60,
    )
    assert isinstance(event, DomainEvent)
    info = await _guest_info(
        launcher, lambda i: bool(i.os and i.os.name and i.filesystems and i.fsfreeze_status), 60
    )
    assert info.os is not None
    assert info.os.name == "kubevirt-py guest"
    assert info.os.kernel_release.endswith("-cloud-amd64")
    assert info.hostname  # the guest names itself (no DHCP here: "guest")
    assert info.timezone.startswith("UTC")
    assert info.agent_version.startswith("7.")
    for required in ("guest-ping", "guest-get-fsinfo", "guest-get-osinfo", "guest-shutdown"):
        assert required in info.supported_commands
    by_mount = {fs.mount_point: fs for fs in info.filesystems}
    assert by_mount["/mnt/cidata"].type == "iso9660"
    assert by_mount["/mnt/cidata"].disks[0].bus_type == "virtio"
    assert by_mount["/data"].type == "ext2"
    assert info.fsfreeze_status == "thawed"
    # GetDomain carries the same report, as the Notify events do.
    domain = (await launcher.cmd.get_domain(GetDomainRequest())).domain
    assert domain is not None
    assert domain.guest is not None
    assert domain.guest.agent_connected

    # Nobody logs in through login(1) on this guest: the agent's user list is empty.
    assert list(info.users) == []

    # The access credentials reached the guest through the agent: upstream's outcome,
    # root's authorized_keys holds the Secret's key, the password is root's.
    synced = await _guest_info(
        launcher, lambda i: i.access_credentials is not None and i.access_credentials.succeeded, 60
    )
    assert synced.access_credentials is not None
    assert synced.access_credentials.message == ""
    keys = await _in_guest(launcher.serial_socket, "cat /root/.ssh/authorized_keys")
    assert KEY in keys
    assert "PASSWORD-MATCHES" in await _in_guest(launcher.serial_socket, _PASSWORD_CHECK)

    # kubelet rewrites the Secret: the new key replaces the old one within a check or two.
    volume = launcher.private_dir / "secret" / "agent-keys-access-cred"
    await asyncio.to_thread(_rewrite_secret, volume, {"key1": NEW_KEY + "\n"})
    deadline = time.monotonic() + 45
    while True:
        keys = await _in_guest(launcher.serial_socket, "cat /root/.ssh/authorized_keys")
        if NEW_KEY in keys and KEY not in keys:
            break
        if time.monotonic() > deadline:
            pytest.fail(f"the rewritten Secret never reached authorized_keys: {keys!r}")
        await asyncio.sleep(2)

    launcher.notify.forget()
    await launcher.cmd.freeze(FreezeRequest(vmi=launcher.ref))
    frozen = await _guest_info(launcher, lambda i: i.fsfreeze_status == "frozen", 30)
    assert frozen.agent_connected
    await launcher.notify.expect(
        lambda item: (
            isinstance(item, DomainEvent)
            and item.domain is not None
            and item.domain.guest is not None
            and item.domain.guest.fsfreeze_status == "frozen"
        ),
        within=30,
    )
    await launcher.cmd.unfreeze(VmiRequest(vmi=launcher.ref))
    await _guest_info(launcher, lambda i: i.fsfreeze_status == "thawed", 30)

    # An unfreeze timeout thaws the guest without an Unfreeze.
    await launcher.cmd.freeze(FreezeRequest(vmi=launcher.ref, unfreeze_timeout_seconds=2))
    await _guest_info(launcher, lambda i: i.fsfreeze_status == "frozen", 10)
    await _guest_info(launcher, lambda i: i.fsfreeze_status == "thawed", 30)

    # SoftReboot goes through the agent (guest-shutdown, mode reboot): the guest's own
    # reboot, not the ACPI button's power-off; the agent connects again after it.
    launcher.notify.forget()
    await launcher.cmd.soft_reboot(VmiRequest(vmi=launcher.ref))
    rebooted = await serial_reader(launcher.serial_socket, agent_guest.marker)
    assert "reboot: Restarting system" in rebooted
    assert "reboot: Power down" not in rebooted
    await launcher.notify.expect(
        lambda item: (
            isinstance(item, DomainEvent)
            and item.domain is not None
            and item.domain.guest is not None
            and not item.domain.guest.agent_connected
        ),
        within=60,
    )
    await _guest_info(launcher, lambda i: i.agent_connected and bool(i.os), 90)
