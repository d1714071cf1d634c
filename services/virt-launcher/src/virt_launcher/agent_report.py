"""What the QEMU guest agent says, decoded into the protocol's GuestInfo parts.

Pure: raw agent replies (``guest-info``, ``guest-get-fsinfo``) and libvirt's typed
guest-info records (``os.name``, ``if.0.addr.0.addr`` ...) in, protocol messages out.
Anything missing or of the wrong type is left empty rather than failing: a guest agent
is the guest's, and may be old, odd or hostile.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass

from virt_rpc import GuestDisk, GuestFilesystem, GuestInterface, GuestOs, GuestUser

__all__ = [
    "AgentVersion",
    "SystemReport",
    "parse_agent_version",
    "parse_filesystems",
    "parse_system",
    "parse_users",
]

# upstream caps what it keeps of long lists (the subresources show at most 10).
_MAX_ITEMS = 64


@dataclass(frozen=True)
class AgentVersion:
    """``guest-info``: the agent's version and its enabled commands (sorted)."""

    version: str = ""
    supported_commands: tuple[str, ...] = ()


@dataclass(frozen=True)
class SystemReport:
    """libvirt's OS, hostname, timezone and interfaces report."""

    os: GuestOs | None = None
    hostname: str = ""
    timezone: str = ""
    interfaces: tuple[GuestInterface, ...] = ()


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _count(record: Mapping[str, object], key: str) -> int:
    value = record.get(key)
    return min(value, _MAX_ITEMS) if isinstance(value, int) and value > 0 else 0


def _number(value: object) -> int:
    return value if isinstance(value, int) and value >= 0 else 0


def parse_agent_version(reply: object) -> AgentVersion:
    """``guest-info``'s return value: {"version", "supported_commands": [{name, enabled}]}."""
    if not isinstance(reply, Mapping):
        return AgentVersion()
    names = {
        _text(command.get("name"))
        for command in reply.get("supported_commands") or ()
        if isinstance(command, Mapping) and command.get("enabled") is True
    }
    return AgentVersion(_text(reply.get("version")), tuple(sorted(names - {""})))


def parse_filesystems(reply: object) -> tuple[GuestFilesystem, ...]:
    """``guest-get-fsinfo``'s return value, in the agent's order."""
    if not isinstance(reply, list):
        return ()
    out: list[GuestFilesystem] = []
    for fs in reply[:_MAX_ITEMS]:
        if not isinstance(fs, Mapping):
            continue
        disks = [
            GuestDisk(
                bus_type=_text(disk.get("bus-type")),
                serial=_text(disk.get("serial")),
                device=_text(disk.get("dev")),
            )
            for disk in fs.get("disk") or ()
            if isinstance(disk, Mapping)
        ]
        out.append(
            GuestFilesystem(
                disk_name=_text(fs.get("name")),
                mount_point=_text(fs.get("mountpoint")),
                type=_text(fs.get("type")),
                used_bytes=_number(fs.get("used-bytes")),
                total_bytes=_number(fs.get("total-bytes")),
                disks=disks,
            )
        )
    return tuple(out)


def parse_system(record: Mapping[str, object]) -> SystemReport:
    """libvirt's guestInfo(OS|HOSTNAME|TIMEZONE|INTERFACES) record."""
    os_fields = {
        "id": "os.id",
        "name": "os.name",
        "pretty_name": "os.pretty-name",
        "version": "os.version",
        "version_id": "os.version-id",
        "kernel_release": "os.kernel-release",
        "kernel_version": "os.kernel-version",
        "machine": "os.machine",
    }
    values = {ours: _text(record.get(theirs)) for ours, theirs in os_fields.items()}
    os = GuestOs(**values) if any(values.values()) else None
    zone = _text(record.get("timezone.name"))
    offset = record.get("timezone.offset")
    # upstream's guestosinfo shows the zone and its offset in seconds: "UTC, 0".
    timezone = f"{zone}, {offset}" if zone and isinstance(offset, int) else zone
    interfaces = []
    for i in range(_count(record, "if.count")):
        addresses = [
            f"{_text(record.get(f'if.{i}.addr.{j}.addr'))}"
            for j in range(_count(record, f"if.{i}.addr.count"))
            if _text(record.get(f"if.{i}.addr.{j}.addr"))
        ]
        interfaces.append(
            GuestInterface(
                name=_text(record.get(f"if.{i}.name")),
                mac=_text(record.get(f"if.{i}.hwaddr")),
                ip_addresses=addresses,
            )
        )
    return SystemReport(os, _text(record.get("hostname")), timezone, tuple(interfaces))


def parse_users(record: Mapping[str, object]) -> tuple[GuestUser, ...]:
    """libvirt's guestInfo(USERS) record; login times are milliseconds since the epoch."""
    users = []
    for i in range(_count(record, "user.count")):
        millis = record.get(f"user.{i}.login-time")
        login = (
            datetime.datetime.fromtimestamp(millis / 1000, datetime.UTC)
            if isinstance(millis, int) and millis > 0
            else None
        )
        users.append(
            GuestUser(
                name=_text(record.get(f"user.{i}.name")),
                domain=_text(record.get(f"user.{i}.domain")),
                login_time=login,
            )
        )
    return tuple(users)
