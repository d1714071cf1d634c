"""The guest agent's report as virt-handler uses it: status facts and the subresources.

Pure: the launcher's GuestInfo (Notify events, GetGuestInfo) in; the views the status
computation reads (status.Observation's agent fields) and upstream's JSON shapes of
`guestosinfo` (v1.VirtualMachineInstanceGuestAgentInfo), `userlist`
(v1.VirtualMachineInstanceGuestOSUserList) and `filesystemlist`
(v1.VirtualMachineInstanceFileSystemList) out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kube_runtime.events import EventType
from virt_rpc import GuestInfo

from .status import (
    ACCESS_CREDENTIALS_SYNCHRONIZED,
    AccessCredentialsView,
    GuestNicView,
    GuestOsView,
)

__all__ = [
    "OLD_SSH_COMMANDS",
    "PASSWORD_COMMANDS",
    "REQUIRED_COMMANDS",
    "SSH_COMMANDS",
    "access_credentials_event",
    "access_credentials_view",
    "filesystem_list",
    "guest_agent_info",
    "guest_nics",
    "guest_os_view",
    "unsupported_reason",
    "user_list",
]

#: upstream's requiredGuestAgentCommands (pkg/virt-handler/guestagent.go).
REQUIRED_COMMANDS = (
    "guest-ping",
    "guest-get-time",
    "guest-info",
    "guest-shutdown",
    "guest-network-get-interfaces",
    "guest-get-fsinfo",
    "guest-get-host-name",
    "guest-get-users",
    "guest-get-timezone",
    "guest-get-osinfo",
)
#: Needed only when an access credential propagates SSH keys through the agent.
SSH_COMMANDS = (
    "guest-ssh-get-authorized-keys",
    "guest-ssh-add-authorized-keys",
    "guest-ssh-remove-authorized-keys",
)
#: Or these, for the launcher's deprecated guest-file path (upstream's old SSH commands).
OLD_SSH_COMMANDS = (
    "guest-exec-status",
    "guest-exec",
    "guest-file-open",
    "guest-file-close",
    "guest-file-read",
    "guest-file-write",
)
#: Needed only when an access credential sets a password through the agent.
PASSWORD_COMMANDS = ("guest-set-user-password",)
# guestosinfo shows at most this many users and filesystems (upstream's limit).
_SHOWN = 10


def _propagations(vmi: Mapping[str, Any]) -> tuple[bool, bool]:
    """(SSH keys, passwords) propagated through the agent by spec.accessCredentials."""
    ssh = password = False
    for credential in (vmi.get("spec") or {}).get("accessCredentials") or ():
        if not isinstance(credential, Mapping):
            continue
        for kind in ("sshPublicKey", "userPassword"):
            method = (credential.get(kind) or {}).get("propagationMethod") or {}
            if isinstance(method, Mapping) and "qemuGuestAgent" in method:
                ssh = ssh or kind == "sshPublicKey"
                password = password or kind == "userPassword"
    return ssh, password


def unsupported_reason(vmi: Mapping[str, Any], supported: Sequence[str]) -> str:
    """upstream's isGuestAgentSupported: why the agent is not supported ("" when it is)."""
    have = set(supported)
    if not have:
        return ""  # the agent has not answered guest-info yet: nothing to judge
    ssh, password = _propagations(vmi)
    if not have.issuperset(REQUIRED_COMMANDS):
        return "This guest agent doesn't support required basic commands"
    if ssh and not (have.issuperset(SSH_COMMANDS) or have.issuperset(OLD_SSH_COMMANDS)):
        return "This guest agent doesn't support required public key commands"
    if password and not have.issuperset(PASSWORD_COMMANDS):
        return "This guest agent doesn't support required password commands"
    return ""


def access_credentials_view(info: GuestInfo | None) -> AccessCredentialsView | None:
    """The launcher's credential propagation outcome (reported with or without an agent)."""
    status = None if info is None else info.access_credentials
    if status is None:
        return None
    return AccessCredentialsView(status.succeeded, status.message)


def access_credentials_event(
    vmi: Mapping[str, Any], patch: Mapping[str, Any]
) -> tuple[EventType, str, str] | None:
    """(type, reason, message) of upstream's event when `patch` changes the
    AccessCredentialsSynchronized condition's status or message; None otherwise."""

    def condition(conditions: object) -> Mapping[str, Any] | None:
        for c in conditions if isinstance(conditions, list | tuple) else ():
            if isinstance(c, Mapping) and c.get("type") == ACCESS_CREDENTIALS_SYNCHRONIZED:
                return c
        return None

    new = condition(patch.get("conditions"))
    if new is None:
        return None
    old = condition((vmi.get("status") or {}).get("conditions"))
    if old is not None and all(old.get(k) == new.get(k) for k in ("status", "message")):
        return None
    message = str(new.get("message") or "")
    if new.get("status") == "True":
        text = "Access credentials sync successful."
        if message:
            text = f"Access credentials sync successful: {message}"
        return "Normal", "AccessCredentialsSyncSuccess", text
    return "Warning", "AccessCredentialsSyncFailed", f"Access credentials sync failed: {message}"


def guest_os_view(info: GuestInfo) -> GuestOsView | None:
    """status.guestOSInfo's values, or None when the agent named no OS."""
    os = info.os
    if os is None:
        return None
    return GuestOsView(
        name=os.name,
        id=os.id,
        pretty_name=os.pretty_name,
        version=os.version,
        version_id=os.version_id,
        kernel_release=os.kernel_release,
        kernel_version=os.kernel_version,
        machine=os.machine,
    )


def guest_nics(info: GuestInfo) -> tuple[GuestNicView, ...]:
    """The guest's interfaces as status.interfaces merges them."""
    return tuple(
        GuestNicView(i.name, i.mac, tuple(i.ip_addresses)) for i in info.interfaces if i.name
    )


def _users(info: GuestInfo, limit: int | None = None) -> list[dict[str, Any]]:
    users = []
    for user in info.users[:limit]:
        entry: dict[str, Any] = {"userName": user.name}
        if user.domain:
            entry["domain"] = user.domain
        if user.login_time is not None:
            entry["loginTime"] = user.login_time.timestamp()
        users.append(entry)
    return users


def _filesystems(info: GuestInfo, limit: int | None = None) -> list[dict[str, Any]]:
    filesystems = []
    for fs in info.filesystems[:limit]:
        entry: dict[str, Any] = {
            "diskName": fs.disk_name,
            "mountPoint": fs.mount_point,
            "fileSystemType": fs.type,
            "usedBytes": fs.used_bytes,
            "totalBytes": fs.total_bytes,
        }
        if fs.disks:
            entry["disk"] = [
                {"busType": d.bus_type, **({"serial": d.serial} if d.serial else {})}
                for d in fs.disks
            ]
        filesystems.append(entry)
    return filesystems


def guest_agent_info(info: GuestInfo) -> dict[str, Any]:
    """The `guestosinfo` answer (v1.VirtualMachineInstanceGuestAgentInfo)."""
    os = guest_os_view(info)
    body: dict[str, Any] = {
        "guestAgentVersion": info.agent_version,
        "hostname": info.hostname,
        "os": os.as_status() if os is not None else {},
        "timezone": info.timezone,
        "fsInfo": {"disks": _filesystems(info, _SHOWN)},
    }
    if info.supported_commands:
        body["supportedCommands"] = [
            {"name": name, "enabled": True} for name in info.supported_commands
        ]
    users = _users(info, _SHOWN)
    if users:
        body["userList"] = users
    if info.fsfreeze_status == "frozen":
        body["fsFreezeStatus"] = "frozen"
    return body


def user_list(info: GuestInfo) -> dict[str, Any]:
    """The `userlist` answer (v1.VirtualMachineInstanceGuestOSUserList)."""
    return {"metadata": {}, "items": _users(info)}


def filesystem_list(info: GuestInfo) -> dict[str, Any]:
    """The `filesystemlist` answer (v1.VirtualMachineInstanceFileSystemList)."""
    return {"metadata": {}, "items": _filesystems(info)}
