"""Access credentials propagated through the guest agent (upstream's access-credentials manager).

A VMI's ``spec.accessCredentials`` with ``propagationMethod.qemuGuestAgent`` name Secrets
that virt-controller mounts into the launcher pod (``secret/<name>-access-cred`` in the
private dir; kubelet refreshes the files when the Secret changes). As upstream:

- **SSH keys** (``sshPublicKey``): every non-empty line of every file of the Secret, for
  each listed user; a user named by several credentials gets the keys of all of them. The
  user's authorized_keys is *replaced* by exactly those keys (libvirt's
  ``AuthorizedSSHKeysSet`` with no flags: guest-ssh-add-authorized-keys with ``reset``).
  An agent without that command gets the file written through guest-file-* (its home
  from ``getent passwd``, directory and file made the user's, 700 and 600, through
  guest-exec), upstream's deprecated path.
- **Passwords** (``userPassword``): each file of the Secret is a user, its trimmed content
  the password (guest-set-user-password, not crypted).

The outcome is upstream's ``AccessCredentialMetadata`` (succeeded, message), which
virt-handler turns into the VMI's ``AccessCredentialsSynchronized`` condition. Secrets are
re-read every few seconds (upstream watches them and applies changes every 15 s) and
applied when they changed, after a failure, after the agent reconnected, and every 5
minutes regardless.
"""

from __future__ import annotations

import asyncio
import base64
import enum
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from service_kit import get_logger
from virt_domain.layout import LauncherLayout

from virt_launcher.errors import LibvirtError
from virt_launcher.mounted import MountedFileError, read_tree

__all__ = [
    "AGENT_OFFLINE",
    "AgentCommands",
    "AgentCredential",
    "CredentialKind",
    "CredentialPropagation",
    "PropagationResult",
    "WantedCredentials",
    "agent_credentials",
    "propagate",
    "read_wanted",
]

_log = get_logger(__name__)

#: Upstream's message while the agent does not answer guest-ping.
AGENT_OFFLINE = "Guest agent is offline"
#: How long a guest-exec of the deprecated path may run (upstream's 10 s).
_EXEC_TIMEOUT = 10.0


class AgentCommands(Protocol):
    """The one thing propagation asks of the domain: raw guest agent commands."""

    async def agent_command(
        self, command: str, arguments: Mapping[str, object] | None = None, wait: int = 10
    ) -> object: ...


class CredentialKind(enum.Enum):
    SSH_PUBLIC_KEY = "sshPublicKey"
    USER_PASSWORD = "userPassword"


@dataclass(frozen=True)
class AgentCredential:
    """One agent-propagated access credential: its Secret and (for SSH keys) its users."""

    secret: str
    users: tuple[str, ...] = ()
    kind: CredentialKind = CredentialKind.SSH_PUBLIC_KEY


def agent_credentials(vmi: Mapping[str, Any]) -> tuple[AgentCredential, ...]:
    """spec.accessCredentials propagated through the guest agent, in spec order."""
    spec = vmi.get("spec")
    listed = spec.get("accessCredentials") if isinstance(spec, Mapping) else None
    out: list[AgentCredential] = []
    for credential in listed if isinstance(listed, list) else ():
        if not isinstance(credential, Mapping):
            continue
        for kind in CredentialKind:
            body = credential.get(kind.value)
            if not isinstance(body, Mapping):
                continue
            secret = ((body.get("source") or {}).get("secret") or {}).get("secretName")
            agent = (body.get("propagationMethod") or {}).get("qemuGuestAgent")
            if not (isinstance(secret, str) and secret and isinstance(agent, Mapping)):
                continue
            users = tuple(u for u in agent.get("users") or () if isinstance(u, str) and u)
            out.append(AgentCredential(secret, users, kind))
            break  # upstream: an SSH key credential wins over a password beside it
    return tuple(out)


@dataclass(frozen=True)
class WantedCredentials:
    """What the guest should hold: keys and password by user (from the mounted Secrets)."""

    keys: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    passwords: Mapping[str, str] = field(default_factory=dict)
    #: Secrets that could not be read (upstream's message each); the rest still applies.
    errors: tuple[str, ...] = ()


def _secret_files(layout: LauncherLayout, secret: str) -> dict[str, bytes]:
    root = layout.private_dir.rstrip("/")
    mount = layout.access_credential_dir(secret)
    try:
        files = read_tree(root, mount[len(root) + 1 :])
    except (MountedFileError, OSError) as exc:
        files, reason = None, str(exc)
    else:
        reason = f"open {mount}: no such file or directory"
    if files is None:
        raise OSError(
            "error occurred while reading the list of secrets files from the base "
            f"directory {mount}: {reason}"
        )
    # Only the volume's top-level files, as upstream (it skips directories).
    return {name: data for name, data in sorted(files.items()) if "/" not in name}


def read_wanted(
    layout: LauncherLayout, credentials: Sequence[AgentCredential]
) -> WantedCredentials:
    """The keys and passwords the credentials' Secrets hold now (blocking: file reads)."""
    keys: dict[str, list[str]] = {}
    passwords: dict[str, str] = {}
    errors: list[str] = []
    for credential in credentials:
        try:
            files = _secret_files(layout, credential.secret)
        except OSError as exc:
            _log.warning(
                "access credential secret unreadable", secret=credential.secret, error=str(exc)
            )
            errors.append(str(exc))
            continue
        if credential.kind is CredentialKind.USER_PASSWORD:
            for user, data in files.items():
                password = data.decode(errors="replace").strip()
                if password:
                    passwords[user] = password
            continue
        found = [
            line.strip()
            for data in files.values()
            for line in data.decode(errors="replace").split("\n")
            if line.strip()
        ]
        # A user whose only Secret is unreadable is left alone (not emptied).
        for user in credential.users:
            keys.setdefault(user, []).extend(found)
    return WantedCredentials(
        {user: tuple(listed) for user, listed in keys.items()}, passwords, tuple(errors)
    )


@dataclass(frozen=True)
class PropagationResult:
    """Upstream's AccessCredentialMetadata: did the last propagation succeed, and why not."""

    succeeded: bool
    message: str = ""
    #: The keys went through guest-file-write (an agent without the ssh commands).
    deprecated_flow: bool = False


async def propagate(guest: AgentCommands, wanted: WantedCredentials) -> PropagationResult:
    """Write `wanted` into the guest through its agent; the outcome in upstream's words."""
    try:
        await guest.agent_command("guest-ping")
    except LibvirtError:
        return PropagationResult(False, AGENT_OFFLINE)
    failure = wanted.errors[-1] if wanted.errors else ""
    deprecated = False
    for user in sorted(wanted.keys):
        try:
            deprecated = await _set_authorized_keys(guest, user, wanted.keys[user]) or deprecated
        except (LibvirtError, _GuestFileError) as exc:
            failure = (
                f"Error encountered writing ssh pub key access credentials for user [{user}]: {exc}"
            )
            _log.warning("setting ssh keys failed", user=user, error=failure)
    for user in sorted(wanted.passwords):
        encoded = base64.b64encode(wanted.passwords[user].encode()).decode()
        try:
            await guest.agent_command(
                "guest-set-user-password",
                {"username": user, "password": encoded, "crypted": False},
            )
        except LibvirtError as exc:
            failure = f"Error encountered setting password for user [{user}]: {exc}"
            _log.warning("setting the password failed", user=user, error=failure)
    if failure:
        return PropagationResult(False, failure)
    return PropagationResult(True, "", deprecated)


async def _set_authorized_keys(guest: AgentCommands, user: str, keys: Sequence[str]) -> bool:
    """Replace the user's authorized_keys with `keys`; True when the deprecated path did."""
    try:
        await guest.agent_command(
            "guest-ssh-add-authorized-keys", {"username": user, "keys": list(keys), "reset": True}
        )
        return False
    except LibvirtError as first:
        _log.debug("guest-ssh-add-authorized-keys failed", user=user, error=str(first))
        try:
            await _write_authorized_keys_file(guest, user, "\n".join(keys))
        except (LibvirtError, _GuestFileError) as second:
            raise _GuestFileError(
                "failed to set SSH keys: error from guest-ssh-add-authorized-keys: "
                f"{first}; error from using guest-file-write: {second}"
            ) from None
        return True


class _GuestFileError(Exception):
    """A step of the deprecated guest-file path failed."""


async def _exec(guest: AgentCommands, command: str, *args: str) -> str:
    """guest-exec `command` and wait for it (upstream's agent.GuestExec); its stdout."""
    started = await guest.agent_command(
        "guest-exec", {"path": command, "arg": list(args), "capture-output": True}
    )
    pid = started.get("pid") if isinstance(started, Mapping) else None
    if not isinstance(pid, int):
        raise _GuestFileError(f"guest-exec {command}: no pid in the reply")
    deadline = time.monotonic() + _EXEC_TIMEOUT
    while True:
        status = await guest.agent_command("guest-exec-status", {"pid": pid})
        if isinstance(status, Mapping) and status.get("exited"):
            break
        if time.monotonic() > deadline:
            raise _GuestFileError(f"guest-exec {command} did not exit in {_EXEC_TIMEOUT:g}s")
        await asyncio.sleep(0.1)
    out = base64.b64decode(str(status.get("out-data") or "")).decode(errors="replace")
    if status.get("exitcode") != 0:
        err = base64.b64decode(str(status.get("err-data") or "")).decode(errors="replace")
        raise _GuestFileError(
            f"guest-exec {command} failed with exit code {status.get('exitcode')}: {err.strip()}"
        )
    return out


async def _read_guest_file(guest: AgentCommands, path: str) -> str:
    handle = await guest.agent_command("guest-file-open", {"path": path, "mode": "r"})
    read = await guest.agent_command("guest-file-read", {"handle": handle})
    await guest.agent_command("guest-file-close", {"handle": handle})
    data = read.get("buf-b64") if isinstance(read, Mapping) else None
    return base64.b64decode(str(data or "")).decode(errors="replace")


async def _write_guest_file(guest: AgentCommands, path: str, contents: str) -> None:
    handle = await guest.agent_command("guest-file-open", {"path": path, "mode": "w"})
    encoded = base64.b64encode(contents.encode()).decode()
    await guest.agent_command("guest-file-write", {"handle": handle, "buf-b64": encoded})
    await guest.agent_command("guest-file-close", {"handle": handle})


async def _write_authorized_keys_file(guest: AgentCommands, user: str, desired: str) -> None:
    """Upstream's agentWriteAuthorizedKeysFile: write ~user/.ssh/authorized_keys if it differs."""
    try:
        entry = (await _exec(guest, "getent", "passwd", user)).strip().split(":")
    except (LibvirtError, _GuestFileError) as exc:
        raise _GuestFileError(f"unable to detect home directory of user {user}: {exc}") from None
    if len(entry) < 6:
        raise _GuestFileError(f"unable to detect home directory of user {user}")
    home, owner = entry[5], f"{entry[2]}:{entry[3]}"
    path = f"{home}/.ssh/authorized_keys"
    exists = True
    try:
        current = await _read_guest_file(guest, path)
    except LibvirtError as exc:
        if "No such file or directory" not in str(exc):
            raise
        current, exists = "", False
    if current == desired:
        return
    directory = path.rpartition("/")[0]
    await _exec(guest, "mkdir", "-p", directory)
    await _exec(guest, "chown", owner, directory)
    await _exec(guest, "chmod", "700", directory)
    if exists:
        await _exec(guest, "chown", owner, path)
        await _exec(guest, "chmod", "600", path)
    await _write_guest_file(guest, path, desired)
    if not exists:
        await _exec(guest, "chown", owner, path)
        await _exec(guest, "chmod", "600", path)


class CredentialPropagation:
    """One VMI's agent-propagated credentials: what was applied, when, and how it went."""

    def __init__(
        self,
        layout: LauncherLayout,
        clock: Callable[[], float] = time.monotonic,
        resync: float = 300.0,
    ) -> None:
        self._layout = layout
        self._clock = clock
        self._resync = resync
        self._credentials: tuple[AgentCredential, ...] = ()
        self._applied: WantedCredentials | None = None
        self._applied_at = 0.0
        self._result: PropagationResult | None = None

    @property
    def credentials(self) -> tuple[AgentCredential, ...]:
        return self._credentials

    def set_credentials(self, credentials: Sequence[AgentCredential]) -> bool:
        """The VMI's credentials from its last sync; True when they changed."""
        if tuple(credentials) == self._credentials:
            return False
        self._credentials = tuple(credentials)
        self._applied = None
        if not self._credentials:
            self._result = None
        return True

    def forget(self) -> None:
        """The guest may have lost what it held (the agent reconnected): apply again."""
        self._applied = None

    def result(self, agent_connected: bool) -> PropagationResult | None:
        """The outcome to report (None: the VMI has no agent-propagated credentials)."""
        if not self._credentials:
            return None
        if not agent_connected:
            return PropagationResult(False, AGENT_OFFLINE)
        return self._result

    async def sync(self, guest: AgentCommands) -> None:
        """Re-read the Secrets; propagate when something is due."""
        if not self._credentials:
            return
        wanted = await asyncio.to_thread(read_wanted, self._layout, self._credentials)
        fresh = self._clock() - self._applied_at < self._resync
        if wanted == self._applied and fresh and self._result and self._result.succeeded:
            return
        result = await propagate(guest, wanted)
        if result.deprecated_flow and not (self._result and self._result.deprecated_flow):
            _log.warning(
                "Used deprecated method to set SSH keys. Update qemu guest agent to 5.2 or "
                "newer to keep SSH key injection working."
            )
        self._result = result
        self._applied = wanted if result.succeeded else None
        self._applied_at = self._clock()
        if result.succeeded:
            _log.info("access credentials propagated through the guest agent")
