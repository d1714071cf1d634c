"""The guest agent poller against a fake domain: schedule, report, changes, commands."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Mapping
from pathlib import Path

import pytest
from virt_domain.layout import LauncherLayout
from virt_launcher.access_credentials import AgentCredential, CredentialKind
from virt_launcher.agent import AgentIntervals, AgentPoller, agent_connected_in_xml
from virt_launcher.errors import DomainStateError, LibvirtError
from virt_launcher.guest import GUEST_INFO_TYPES, USER_INFO_TYPES
from virt_launcher.states import DomainState
from virt_rpc import AccessCredentialsStatus

NAME = "default_vm"
GUEST_INFO = {
    "version": "7.2.22",
    "supported_commands": [
        {"name": "guest-ping", "enabled": True},
        {"name": "guest-get-osinfo", "enabled": True},
        {"name": "guest-exec", "enabled": False},
    ],
}
SYSTEM = {
    "os.name": "kubevirt-py guest",
    "os.id": "kubevirt-py-guest",
    "os.kernel-release": "6.1.0-57-cloud-amd64",
    "hostname": "vm1",
    "timezone.name": "UTC",
    "timezone.offset": 0,
    "if.count": 1,
    "if.0.name": "eth0",
    "if.0.hwaddr": "02:00:00:00:00:01",
    "if.0.addr.count": 1,
    "if.0.addr.0.addr": "10.0.2.2",
    "if.0.addr.0.prefix": 24,
}
USERS = {"user.count": 1, "user.0.name": "root", "user.0.login-time": 1_700_000_000_000}
FSINFO = [
    {
        "name": "vda",
        "mountpoint": "/mnt/cidata",
        "type": "iso9660",
        "used-bytes": 100,
        "total-bytes": 200,
        "disk": [{"bus-type": "virtio", "dev": "/dev/vda", "serial": "s1"}],
    }
]


class FakeDomain:
    """Answers agent commands like qemu-ga does; records every call."""

    def __init__(self, xml: str = "<domain/>") -> None:
        self.calls: list[str] = []
        self.arguments: list[tuple[str, Mapping[str, object] | None]] = []
        self.frozen = False
        self.failing: set[str] = set()
        self.system: dict[str, object] = dict(SYSTEM)
        #: authorized_keys by user, as qemu-ga's ssh commands keep them
        self.keys: dict[str, list[str]] = {}
        #: passwords set by user (decoded)
        self.passwords: dict[str, str] = {}
        self._xml = xml

    async def xml(self) -> str:
        return self._xml

    async def agent_command(
        self, command: str, arguments: Mapping[str, object] | None = None, wait: int = 10
    ) -> object:
        self.calls.append(command)
        self.arguments.append((command, arguments))
        if command in self.failing:
            raise LibvirtError("guest agent is not responding", 86)
        if command == "guest-ssh-add-authorized-keys":
            assert arguments is not None
            user = str(arguments["username"])
            given = [str(k) for k in arguments.get("keys") or ()]  # type: ignore[attr-defined]
            held = [] if arguments.get("reset") else self.keys.get(user, [])
            self.keys[user] = held + [k for k in given if k not in held]
            return {}
        if command == "guest-set-user-password":
            assert arguments is not None
            assert arguments["crypted"] is False
            password = base64.b64decode(str(arguments["password"])).decode()
            self.passwords[str(arguments["username"])] = password
            return {}
        return {
            "guest-info": GUEST_INFO,
            "guest-get-fsinfo": FSINFO,
            "guest-fsfreeze-status": "frozen" if self.frozen else "thawed",
        }.get(command, {})

    async def guest_info(self, types: int) -> dict[str, object]:
        self.calls.append(f"guestInfo:{types}")
        if types == USER_INFO_TYPES:
            return dict(USERS)
        assert types == GUEST_INFO_TYPES
        return dict(self.system)

    async def freeze_filesystems(self) -> int:
        self.calls.append("freeze")
        self.frozen = True
        return 1

    async def thaw_filesystems(self) -> int:
        self.calls.append("thaw")
        self.frozen = False
        return 1


class FakeHost:
    def __init__(self, domain: FakeDomain | None) -> None:
        self.domain = domain

    async def lookup(self, name: str) -> FakeDomain | None:
        assert name == NAME
        return self.domain


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _poller(
    domain: FakeDomain | None = None, layout: LauncherLayout | None = None
) -> tuple[AgentPoller, FakeDomain, Clock, list[int]]:
    domain = domain or FakeDomain()
    clock = Clock()
    changes: list[int] = []
    poller = AgentPoller(FakeHost(domain), NAME, lambda: changes.append(1), layout, clock=clock)
    return poller, domain, clock, changes


async def test_nothing_is_reported_or_asked_until_the_agent_connects() -> None:
    poller, domain, _, changes = _poller()
    assert not poller.info.agent_connected
    poller.agent_changed("default_other", True)  # another domain's agent
    assert not poller.connected
    assert changes == []
    assert domain.calls == []


async def test_a_connected_agent_is_asked_everything_at_once() -> None:
    poller, _, _, changes = _poller()
    poller.agent_changed(NAME, True)
    await poller.poll_due()
    info = poller.info
    assert info.agent_connected
    assert info.agent_version == "7.2.22"
    assert info.supported_commands == ["guest-get-osinfo", "guest-ping"]  # enabled only
    assert info.os is not None
    assert info.os.name == "kubevirt-py guest"
    assert info.hostname == "vm1"
    assert info.timezone == "UTC, 0"
    assert [(i.name, i.mac, i.ip_addresses) for i in info.interfaces] == [
        ("eth0", "02:00:00:00:00:01", ["10.0.2.2"])
    ]
    assert [u.name for u in info.users] == ["root"]
    assert info.users[0].login_time is not None
    assert info.users[0].login_time.year == 2023
    fs = info.filesystems[0]
    assert (fs.disk_name, fs.mount_point, fs.type, fs.used_bytes, fs.total_bytes) == (
        "vda",
        "/mnt/cidata",
        "iso9660",
        100,
        200,
    )
    assert fs.disks[0].bus_type == "virtio"
    assert info.fsfreeze_status == "thawed"
    # Connecting and the first report: a change each, so two Notify events at most.
    assert 1 <= len(changes) <= 2


async def test_a_running_guests_agent_is_published_once_with_its_first_answers() -> None:
    """One report for the connect and what the agent said: one status write, not two."""
    poller, _, _, changes = _poller()
    poller.domain_changed(DomainState.RUNNING)
    poller.agent_changed(NAME, True)
    assert changes == []  # the answers are asked for at once and come with it
    await poller.poll_due()
    assert changes == [1]
    assert poller.info.agent_connected
    assert poller.info.os is not None
    poller.agent_changed(NAME, False)
    assert changes == [1, 1]  # a disconnect is published at once


async def test_intervals_start_at_ten_seconds_and_double_up_to_the_maximum() -> None:
    poller, domain, clock, _ = _poller()
    poller.agent_changed(NAME, True)
    assert await poller.poll_due() == pytest.approx(5.0)  # fsfreeze: min(10, its 5 s max)
    domain.calls.clear()
    clock.now += 5
    await poller.poll_due()
    assert domain.calls == ["guest-fsfreeze-status"]
    domain.calls.clear()
    clock.now += 5  # t=10: everything else had its first wait of 10 s
    await poller.poll_due()
    assert set(domain.calls) == {
        "guest-info",
        f"guestInfo:{GUEST_INFO_TYPES}",
        f"guestInfo:{USER_INFO_TYPES}",
        "guest-get-fsinfo",
        "guest-fsfreeze-status",
    }
    domain.calls.clear()
    clock.now += 10  # t=20: users (10 s max) and fsfreeze again; the rest wait 20 s
    await poller.poll_due()
    assert sorted(domain.calls) == ["guest-fsfreeze-status", f"guestInfo:{USER_INFO_TYPES}"]
    domain.calls.clear()
    clock.now += 10  # t=30: the 20 s wait of the others ends
    await poller.poll_due()
    assert "guest-info" in domain.calls
    assert "guest-get-fsinfo" in domain.calls


async def test_a_change_in_the_report_is_published_once() -> None:
    poller, domain, clock, changes = _poller()
    poller.agent_changed(NAME, True)
    await poller.poll_due()
    changes.clear()
    clock.now += 10
    await poller.poll_due()
    assert changes == []  # the same answers again: no event
    domain.system["hostname"] = "renamed"
    clock.now += 120
    await poller.poll_due()
    assert changes == [1]
    assert poller.info.hostname == "renamed"


async def test_a_failing_command_keeps_what_the_agent_said_last() -> None:
    poller, domain, clock, _ = _poller()
    poller.agent_changed(NAME, True)
    await poller.poll_due()
    domain.failing.add("guest-get-fsinfo")
    clock.now += 300
    await poller.poll_due()
    assert poller.info.filesystems[0].mount_point == "/mnt/cidata"


async def test_disconnect_and_domain_stop_clear_the_report() -> None:
    poller, _, _, changes = _poller()
    poller.agent_changed(NAME, True)
    await poller.poll_due()
    changes.clear()
    poller.agent_changed(NAME, False)
    assert poller.info == type(poller.info)(agent_connected=False)
    assert changes == [1]
    poller.agent_changed(NAME, True)
    await poller.poll_due()
    poller.domain_changed(DomainState.SHUTOFF)
    assert not poller.connected


async def test_run_polls_an_agent_the_live_xml_shows_connected_and_pauses_with_the_guest() -> None:
    xml = (
        "<domain><devices><channel type='unix'>"
        "<target type='virtio' name='org.qemu.guest_agent.0' state='connected'/>"
        "</channel></devices></domain>"
    )
    fake = FakeDomain(xml)
    poller = AgentPoller(
        FakeHost(fake),
        NAME,
        lambda: None,
        intervals=AgentIntervals(fsfreeze=0.01, users=0.01, first=0.01),
    )
    task = asyncio.create_task(poller.run())
    try:
        for _ in range(200):
            if poller.info.os is not None:
                break
            await asyncio.sleep(0.01)
        assert poller.connected
        assert poller.info.os is not None
        poller.domain_changed(DomainState.PAUSED)
        await asyncio.sleep(0.05)
        count = len(fake.calls)
        await asyncio.sleep(0.1)
        assert len(fake.calls) == count  # paused: no polls
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


def test_the_agent_channel_state_is_read_from_the_live_xml() -> None:
    assert not agent_connected_in_xml("<domain/>")
    assert not agent_connected_in_xml("not xml")
    assert not agent_connected_in_xml(
        "<domain><devices><channel><target name='org.qemu.guest_agent.0' "
        "state='disconnected'/></channel></devices></domain>"
    )


async def test_freeze_needs_an_agent_and_thaws_after_the_timeout() -> None:
    poller, domain, _, changes = _poller()
    with pytest.raises(DomainStateError, match="not connected"):
        await poller.freeze(0)
    poller.agent_changed(NAME, True)
    await poller.poll_due()
    changes.clear()
    await poller.freeze(0.05)
    assert domain.frozen
    assert poller.info.fsfreeze_status == "frozen"
    assert changes == [1]
    await poller.freeze(0.05)  # frozen already: the timer restarts, no second freeze
    assert domain.calls.count("freeze") == 1
    for _ in range(100):
        if not domain.frozen:
            break
        await asyncio.sleep(0.01)
    assert not domain.frozen
    assert poller.info.fsfreeze_status == "thawed"


async def test_unfreeze_cancels_the_timeout_and_a_frozen_agent_keeps_its_commands() -> None:
    poller, domain, clock, _ = _poller()
    poller.agent_changed(NAME, True)
    await poller.poll_due()
    await poller.freeze(60)
    domain.calls.clear()
    clock.now += 300
    await poller.poll_due()
    assert "guest-info" not in domain.calls  # its command list is not the agent's while frozen
    assert poller.info.supported_commands == ["guest-get-osinfo", "guest-ping"]
    await poller.unfreeze()
    assert not domain.frozen
    assert poller.info.fsfreeze_status == "thawed"
    await poller.close()


def _mount_keys(private: Path, secret: str, files: dict[str, str]) -> None:
    volume = private / "secret" / f"{secret}-access-cred"
    volume.mkdir(parents=True)
    for name, text in files.items():
        (volume / name).write_text(text)


async def test_agent_credentials_replace_authorized_keys_and_set_passwords(
    tmp_path: Path,
) -> None:
    layout = LauncherLayout(private_dir=str(tmp_path))
    _mount_keys(tmp_path, "keys", {"a": "ssh-ed25519 AAAA1 one\n\nssh-ed25519 AAAA2 two\n"})
    _mount_keys(tmp_path, "pw", {"root": "s3cret\n"})
    poller, domain, clock, _changes = _poller(layout=layout)
    domain.keys["root"] = ["ssh-ed25519 OWN mine"]  # upstream replaces the whole file
    poller.set_credentials(
        [
            AgentCredential("keys", ("root", "admin")),
            AgentCredential("pw", (), CredentialKind.USER_PASSWORD),
        ]
    )
    # No agent yet: upstream's condition says so.
    offline = poller.info.access_credentials
    assert offline is not None
    assert (offline.succeeded, offline.message) == (False, "Guest agent is offline")
    poller.agent_changed(NAME, True)
    await poller.poll_due()
    both = ["ssh-ed25519 AAAA1 one", "ssh-ed25519 AAAA2 two"]
    assert domain.keys == {"root": both, "admin": both}
    assert domain.passwords == {"root": "s3cret"}
    synced = poller.info.access_credentials
    assert synced is not None
    assert (synced.succeeded, synced.message) == (True, "")

    # Unchanged Secrets are not written again at the next checks.
    domain.arguments.clear()
    clock.now += 15
    await poller.poll_due()
    assert [c for c, _ in domain.arguments if c.startswith("guest-s")] == []

    # The Secret changes (kubelet rewrites the file): the next check applies it.
    (tmp_path / "secret" / "keys-access-cred" / "a").write_text("ssh-ed25519 AAAA3 three\n")
    clock.now += 15
    await poller.poll_due()
    assert domain.keys == {
        "root": ["ssh-ed25519 AAAA3 three"],
        "admin": ["ssh-ed25519 AAAA3 three"],
    }

    # A rebooted guest lost its keys: the reconnected agent gets them again.
    poller.agent_changed(NAME, False)
    domain.keys = {}
    poller.agent_changed(NAME, True)
    await poller.poll_due()
    assert domain.keys["root"] == ["ssh-ed25519 AAAA3 three"]


async def test_a_failed_propagation_is_reported_and_retried(tmp_path: Path) -> None:
    layout = LauncherLayout(private_dir=str(tmp_path))
    _mount_keys(tmp_path, "pw", {"root": "s3cret"})
    poller, domain, clock, _ = _poller(layout=layout)
    poller.set_credentials([AgentCredential("pw", (), CredentialKind.USER_PASSWORD)])
    domain.failing.add("guest-set-user-password")
    poller.agent_changed(NAME, True)
    await poller.poll_due()
    failed = poller.info.access_credentials
    assert failed is not None
    assert not failed.succeeded
    assert failed.message == (
        "Error encountered setting password for user [root]: guest agent is not responding"
    )
    domain.failing.clear()
    clock.now += 15
    await poller.poll_due()
    assert domain.passwords == {"root": "s3cret"}
    assert poller.info.access_credentials == AccessCredentialsStatus(succeeded=True, message="")


async def test_no_agent_credentials_report_nothing() -> None:
    poller, _, _, _ = _poller()
    poller.agent_changed(NAME, True)
    await poller.poll_due()
    assert poller.info.access_credentials is None
