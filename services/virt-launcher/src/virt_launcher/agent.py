"""The guest agent poller: what the QEMU guest agent reports, kept fresh, and its commands.

As upstream's agent poller: polling starts when libvirt reports the agent channel
connected (or the live XML says so), stops when it disconnects, the guest pauses or the
domain stops, and resumes when the guest runs again. Each kind of question has its own
interval: the first poll is immediate, the next after 10 s, doubling up to the maximum
(upstream's launcher flags: guest-info 300 s, OS/hostname/timezone/interfaces 120 s,
users 10 s, filesystems 300 s, fsfreeze status 5 s). Every change of the report calls
``on_change`` (the launcher sends a Notify event with it). Every libvirt call runs in
the launcher's executor (Guest's methods).

Freeze/Unfreeze run guest-fsfreeze-freeze/thaw through libvirt; a freeze with an
unfreeze timeout is thawed by the poller when it expires. Access credentials with
``propagationMethod.qemuGuestAgent`` (SSH keys, passwords) are propagated by
``virt_launcher.access_credentials``, checked every 15 s while the agent is connected.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from service_kit import get_logger
from virt_domain.converter.channels import GUEST_AGENT_CHANNEL
from virt_domain.layout import LauncherLayout
from virt_rpc import (
    AccessCredentialsStatus,
    GuestFilesystem,
    GuestInfo,
    GuestInterface,
    GuestOs,
    GuestUser,
)

from virt_launcher.access_credentials import AgentCredential, CredentialPropagation
from virt_launcher.agent_report import (
    parse_agent_version,
    parse_filesystems,
    parse_system,
    parse_users,
)
from virt_launcher.errors import DomainStateError, LibvirtError
from virt_launcher.guest import GUEST_INFO_TYPES, USER_INFO_TYPES
from virt_launcher.states import DomainState

__all__ = [
    "FROZEN",
    "THAWED",
    "AgentDomain",
    "AgentIntervals",
    "AgentPoller",
    "DomainLookup",
    "agent_connected_in_xml",
]

_log = get_logger(__name__)

FROZEN = "frozen"
THAWED = "thawed"


class AgentDomain(Protocol):
    """What the poller asks of the domain (virt_launcher.guest.Guest)."""

    async def xml(self) -> str: ...

    async def agent_command(
        self, command: str, arguments: Mapping[str, object] | None = None, wait: int = 10
    ) -> object: ...

    async def guest_info(self, types: int) -> dict[str, object]: ...

    async def freeze_filesystems(self) -> int: ...

    async def thaw_filesystems(self) -> int: ...


class DomainLookup(Protocol):
    """Where the poller finds the domain (virt_launcher.host.Host)."""

    async def lookup(self, name: str) -> AgentDomain | None: ...


class _Query(enum.Enum):
    VERSION = "guest-info"
    SYSTEM = "guest-info os/hostname/timezone/interfaces"
    USERS = "guest-info users"
    FILESYSTEMS = "guest-get-fsinfo"
    FSFREEZE = "guest-fsfreeze-status"
    CREDENTIALS = "access credentials"


@dataclass(frozen=True)
class AgentIntervals:
    """The longest wait between two polls of each kind, and the first wait (seconds)."""

    version: float = 300.0
    system: float = 120.0
    users: float = 10.0
    filesystems: float = 300.0
    fsfreeze: float = 5.0
    #: How often the credentials' Secrets are compared with what was applied (upstream's 15 s).
    credentials: float = 15.0
    first: float = 10.0

    def maximum(self, query: _Query) -> float:
        return {
            _Query.VERSION: self.version,
            _Query.SYSTEM: self.system,
            _Query.USERS: self.users,
            _Query.FILESYSTEMS: self.filesystems,
            _Query.FSFREEZE: self.fsfreeze,
            _Query.CREDENTIALS: self.credentials,
        }[query]


def agent_connected_in_xml(domain_xml: str) -> bool:
    """Whether the live XML's agent channel target says ``state='connected'``."""
    try:
        root = ET.fromstring(domain_xml)
    except ET.ParseError:
        return False
    for target in root.iterfind("./devices/channel/target"):
        if target.get("name") == GUEST_AGENT_CHANNEL:
            return target.get("state") == "connected"
    return False


@dataclass
class _Schedule:
    due: float = 0.0
    wait: float = 0.0


@dataclass
class _Report:
    version: str = ""
    supported_commands: tuple[str, ...] = ()
    os: GuestOs | None = None
    hostname: str = ""
    timezone: str = ""
    interfaces: tuple[GuestInterface, ...] = ()
    users: tuple[GuestUser, ...] = ()
    filesystems: tuple[GuestFilesystem, ...] = ()
    fsfreeze_status: str = ""


class AgentPoller:
    """Keeps the guest agent's report of the domain ``domain_name`` on ``host``."""

    def __init__(
        self,
        host: DomainLookup,
        domain_name: str,
        on_change: Callable[[], None],
        layout: LauncherLayout | None = None,
        intervals: AgentIntervals | None = None,
        clock: Callable[[], float] = time.monotonic,
        command_timeout: int = 10,
    ) -> None:
        self._host = host
        self._domain_name = domain_name
        self._on_change = on_change
        self._layout = layout or LauncherLayout()
        self._intervals = intervals or AgentIntervals()
        self._clock = clock
        self._timeout = command_timeout
        self._connected = False
        self._running = True
        self._report = _Report()
        self._credentials = CredentialPropagation(self._layout, clock)
        self._published = self.info
        self._schedules = {query: _Schedule() for query in _Query}
        self._wake = asyncio.Event()
        self._thaw_task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()

    # -- what callers read

    @property
    def connected(self) -> bool:
        """Whether the guest agent's channel is open."""
        return self._connected

    @property
    def info(self) -> GuestInfo:
        """The agent's last report (all empty while no agent is connected)."""
        result = self._credentials.result(self._connected)
        access = (
            None
            if result is None
            else AccessCredentialsStatus(succeeded=result.succeeded, message=result.message)
        )
        if not self._connected:
            return GuestInfo(agent_connected=False, access_credentials=access)
        r = self._report
        return GuestInfo(
            agent_connected=True,
            access_credentials=access,
            supported_commands=list(r.supported_commands),
            fsfreeze_status=r.fsfreeze_status,
            agent_version=r.version,
            hostname=r.hostname,
            os=r.os,
            timezone=r.timezone,
            interfaces=list(r.interfaces),
            users=list(r.users),
            filesystems=list(r.filesystems),
        )

    # -- what drives it (called on the event loop)

    def agent_changed(self, domain_name: str, connected: bool) -> None:
        """libvirt's agent lifecycle event: the channel opened or closed."""
        if domain_name == self._domain_name:
            self._set_connected(connected)

    def domain_changed(self, state: DomainState) -> None:
        """The domain's state changed: polls pause with the guest and end with it."""
        self._running = state in (DomainState.RUNNING, DomainState.BLOCKED)
        if state in (DomainState.SHUTOFF, DomainState.CRASHED):
            self._set_connected(False)
        self._wake.set()

    def set_credentials(self, credentials: Sequence[AgentCredential]) -> None:
        """The VMI's agent-propagated access credentials (from its last sync)."""
        if self._credentials.set_credentials(credentials):
            self._schedules[_Query.CREDENTIALS] = _Schedule(due=self._clock())
            self._publish()
            self._wake.set()

    def _set_connected(self, connected: bool) -> None:
        if connected == self._connected:
            return
        self._connected = connected
        self._report = _Report()
        self._credentials.forget()
        # A (re)connected agent is asked everything at once, then backs off anew.
        self._schedules = {query: _Schedule(due=self._clock()) for query in _Query}
        _log.info("guest agent connected" if connected else "guest agent disconnected")
        if not connected or not self._running:
            self._publish()
        # else the first round of answers (asked at once) publishes the connect with
        # what the agent said: one report, so virt-handler makes one status write
        self._wake.set()

    def _publish(self) -> None:
        info = self.info
        if info != self._published:
            self._published = info
            self._on_change()

    # -- the loop

    async def run(self) -> None:
        """Poll until cancelled; reads the live XML once for an agent already connected."""
        with contextlib.suppress(LibvirtError):
            guest = await self._host.lookup(self._domain_name)
            if guest is not None and agent_connected_in_xml(await guest.xml()):
                self._set_connected(True)
        while True:
            delay = await self.poll_due() if self._connected and self._running else None
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), delay)

    async def poll_due(self) -> float:
        """Ask every question whose time has come; seconds until the next one is due."""
        guest = await self._guest()
        now = self._clock()
        for query, schedule in self._schedules.items():
            if guest is None or schedule.due > now:
                continue
            await self._ask(guest, query)
            limit = self._intervals.maximum(query)
            schedule.wait = (
                min(self._intervals.first, limit)
                if schedule.wait == 0
                else min(schedule.wait * 2, limit)
            )
            schedule.due = now + schedule.wait
        self._publish()
        return max(0.0, min(s.due for s in self._schedules.values()) - self._clock())

    async def _guest(self) -> AgentDomain | None:
        try:
            return await self._host.lookup(self._domain_name)
        except LibvirtError:
            return None

    async def _ask(self, guest: AgentDomain, query: _Query) -> None:
        r = self._report
        try:
            if query is _Query.VERSION:
                # A frozen agent reports most commands disabled: not a version to judge.
                if r.fsfreeze_status != FROZEN:
                    version = parse_agent_version(await guest.agent_command("guest-info"))
                    r.version, r.supported_commands = version.version, version.supported_commands
            elif query is _Query.SYSTEM:
                system = parse_system(await guest.guest_info(GUEST_INFO_TYPES))
                r.os, r.hostname, r.timezone = system.os, system.hostname, system.timezone
                r.interfaces = system.interfaces
            elif query is _Query.USERS:
                r.users = parse_users(await guest.guest_info(USER_INFO_TYPES))
            elif query is _Query.FILESYSTEMS:
                r.filesystems = parse_filesystems(await guest.agent_command("guest-get-fsinfo"))
            elif query is _Query.FSFREEZE:
                status = await guest.agent_command("guest-fsfreeze-status")
                r.fsfreeze_status = status if isinstance(status, str) else ""
            elif query is _Query.CREDENTIALS:
                await self._credentials.sync(guest)
        except (LibvirtError, ValueError) as exc:
            # A busy, frozen or restarting agent (or a reply that is not JSON): keep what
            # it said last.
            _log.debug("guest agent query failed", query=query.value, error=str(exc))

    # -- commands

    async def _agent_guest(self) -> AgentDomain:
        if not self._connected:
            raise DomainStateError("the guest agent is not connected")
        guest = await self._guest()
        if guest is None:
            raise DomainStateError(f"domain {self._domain_name} is not defined")
        return guest

    async def freeze(self, unfreeze_timeout: float) -> None:
        """Freeze the guest's filesystems; thawed again after ``unfreeze_timeout`` (0: never)."""
        async with self._lock:
            guest = await self._agent_guest()
            if self._report.fsfreeze_status != FROZEN:
                await guest.freeze_filesystems()
            self._report.fsfreeze_status = FROZEN
            self._cancel_thaw()
            if unfreeze_timeout > 0:
                self._thaw_task = asyncio.create_task(
                    self._thaw_after(unfreeze_timeout), name="unfreeze-timeout"
                )
        self._publish()

    async def unfreeze(self) -> None:
        """Thaw the guest's filesystems (a no-op when none is frozen)."""
        async with self._lock:
            self._cancel_thaw()
            guest = await self._agent_guest()
            await guest.thaw_filesystems()
            self._report.fsfreeze_status = THAWED
        self._publish()

    def _cancel_thaw(self) -> None:
        task, self._thaw_task = self._thaw_task, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()

    async def _thaw_after(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
        _log.warning("unfreeze timeout expired; thawing the guest", seconds=seconds)
        try:
            await self.unfreeze()
        except LibvirtError as exc:
            _log.warning("thawing after the unfreeze timeout failed", error=str(exc))

    async def follow(self, changes: asyncio.Queue[Any]) -> None:
        """Read the domain manager's subscription: each change's state drives the polls."""
        while True:
            item = await changes.get()
            status = getattr(item, "status", None)
            if status is not None:
                self.domain_changed(status.state)

    async def close(self) -> None:
        """Stop the unfreeze timer (the guest stays as it is)."""
        self._cancel_thaw()
