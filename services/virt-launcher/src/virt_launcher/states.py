"""Domain states and reasons as the launcher reports them, decoded from libvirt.

These are the launcher's own values (they mirror the protocol's enums one to one),
so the domain manager does not depend on the wire format; with them, the guest
interfaces of the defined domain.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from virt_domain import Domain

from virt_launcher.memory_dump_record import MemoryDumpRecord
from virt_launcher.migration_record import MigrationRecord

__all__ = [
    "EVENT_CRASHED",
    "EVENT_DEFINED",
    "EVENT_PMSUSPENDED",
    "EVENT_RESUMED",
    "EVENT_SHUTDOWN",
    "EVENT_STARTED",
    "EVENT_STOPPED",
    "EVENT_SUSPENDED",
    "EVENT_UNDEFINED",
    "ChangeKind",
    "DomainChange",
    "DomainReason",
    "DomainState",
    "DomainStatus",
    "GuestDisk",
    "GuestNic",
    "LifecycleEvent",
    "decode_lifecycle",
    "decode_state",
    "guest_disks",
    "guest_nics",
]


class DomainState(enum.IntEnum):
    """libvirt's domain states (values equal the protocol's DomainState)."""

    UNSPECIFIED = 0
    RUNNING = 1
    BLOCKED = 2
    PAUSED = 3
    SHUTTING_DOWN = 4
    SHUTOFF = 5
    CRASHED = 6
    PMSUSPENDED = 7


class DomainReason(enum.IntEnum):
    """Why the domain is in its state (values equal the protocol's DomainReason)."""

    UNSPECIFIED = 0
    BOOTED = 1
    UNPAUSED = 2
    USER = 3
    GUEST_SHUTDOWN = 4
    DESTROYED = 5
    CRASHED = 6
    FAILED = 7
    MIGRATED = 8
    SAVED = 9
    RESTORED = 10
    FROM_SNAPSHOT = 11
    IO_ERROR = 12
    WATCHDOG = 13
    PANICKED = 14
    WAKEUP = 15
    STARTING_UP = 16
    NON_EXISTENT = 17


class ChangeKind(enum.Enum):
    """How the domain changed: it appeared, changed state, or went away."""

    ADDED = "Added"
    MODIFIED = "Modified"
    DELETED = "Deleted"


@dataclass(frozen=True)
class GuestNic:
    """One guest interface of the defined domain: the VMI interface it stands for (its
    alias `ua-<name>`), the guest MAC and the host tap."""

    name: str
    mac: str
    tap: str = ""


@dataclass(frozen=True)
class GuestDisk:
    """One disk of the domain: the VMI disk it stands for (its alias `ua-<name>`) and the
    guest device it is (``vda``, ``sda``)."""

    name: str
    target: str


@dataclass(frozen=True)
class DomainStatus:
    """A domain's identity and state at one moment."""

    name: str
    uuid: str
    state: DomainState
    reason: DomainReason
    #: The user-visible interfaces of the domain as defined (status.interfaces reads them).
    interfaces: tuple[GuestNic, ...] = ()
    #: The live migration this domain takes part in, if any (Domain.migration).
    migration: MigrationRecord | None = None
    #: The user-visible disks of the running domain (hotplugged ones once attached).
    disks: tuple[GuestDisk, ...] = ()
    #: The last memory dump this launcher started, if any (Domain.memory_dump).
    memory_dump: MemoryDumpRecord | None = None
    #: The launcher shut the guest down because its pod is being stopped (SIGTERM).
    pod_stopping: bool = False


def guest_nics(domain_xml: str) -> tuple[GuestNic, ...]:
    """The `ua-<name>` interfaces of a domain XML, in device order."""
    nics = []
    for iface in Domain.from_xml(domain_xml).devices.interfaces:
        name = iface.alias.user_device if iface.alias else None
        if name is None or iface.mac is None:
            continue
        nics.append(GuestNic(name, iface.mac.address, iface.target.dev if iface.target else ""))
    return tuple(nics)


def guest_disks(domain_xml: str) -> tuple[GuestDisk, ...]:
    """The `ua-<name>` disks of a domain XML with their target, in device order."""
    disks = []
    for disk in Domain.from_xml(domain_xml).devices.disks:
        name = disk.alias.user_device if disk.alias else None
        dev = disk.target.dev if disk.target else None
        if name is None or not dev:
            continue
        disks.append(GuestDisk(name, dev))
    return tuple(disks)


@dataclass(frozen=True)
class DomainChange:
    """One change the launcher reports to virt-handler; ``sequence`` strictly increases."""

    kind: ChangeKind
    status: DomainStatus
    sequence: int


@dataclass(frozen=True)
class LifecycleEvent:
    """A libvirt lifecycle event as delivered: raw event and detail numbers."""

    name: str
    uuid: str
    event: int
    detail: int


# libvirt's virDomainEventType values (stable ABI).
EVENT_DEFINED = 0
EVENT_UNDEFINED = 1
EVENT_STARTED = 2
EVENT_SUSPENDED = 3
EVENT_RESUMED = 4
EVENT_STOPPED = 5
EVENT_SHUTDOWN = 6
EVENT_PMSUSPENDED = 7
EVENT_CRASHED = 8

_R = DomainReason
_STARTED = (_R.BOOTED, _R.MIGRATED, _R.RESTORED, _R.FROM_SNAPSHOT, _R.WAKEUP)
_SUSPENDED = (
    _R.USER,
    _R.MIGRATED,
    _R.IO_ERROR,
    _R.WATCHDOG,
    _R.RESTORED,
    _R.FROM_SNAPSHOT,
    _R.FAILED,
    _R.MIGRATED,
    _R.FAILED,
)
_RESUMED = (_R.UNPAUSED, _R.MIGRATED, _R.FROM_SNAPSHOT, _R.MIGRATED, _R.FAILED)
_STOPPED = (
    _R.GUEST_SHUTDOWN,
    _R.DESTROYED,
    _R.CRASHED,
    _R.MIGRATED,
    _R.SAVED,
    _R.FAILED,
    _R.FROM_SNAPSHOT,
)
_SHUTDOWN = (_R.USER, _R.GUEST_SHUTDOWN, _R.USER)


def _pick(table: tuple[DomainReason, ...], detail: int) -> DomainReason:
    return table[detail] if 0 <= detail < len(table) else DomainReason.UNSPECIFIED


def decode_lifecycle(event: int, detail: int) -> tuple[ChangeKind, DomainState, DomainReason]:
    """Translate a lifecycle event into what it means for the domain's state.

    DEFINED is reported as shut off: a defined domain has not started yet (a
    redefinition of a running domain is followed by a state query by the caller).
    """
    if event == EVENT_DEFINED:
        kind = ChangeKind.ADDED if detail == 0 else ChangeKind.MODIFIED
        return kind, DomainState.SHUTOFF, DomainReason.UNSPECIFIED
    if event == EVENT_UNDEFINED:
        return ChangeKind.DELETED, DomainState.SHUTOFF, DomainReason.NON_EXISTENT
    if event == EVENT_STARTED:
        return ChangeKind.MODIFIED, DomainState.RUNNING, _pick(_STARTED, detail)
    if event == EVENT_SUSPENDED:
        return ChangeKind.MODIFIED, DomainState.PAUSED, _pick(_SUSPENDED, detail)
    if event == EVENT_RESUMED:
        return ChangeKind.MODIFIED, DomainState.RUNNING, _pick(_RESUMED, detail)
    if event == EVENT_STOPPED:
        return ChangeKind.MODIFIED, DomainState.SHUTOFF, _pick(_STOPPED, detail)
    if event == EVENT_SHUTDOWN:
        return ChangeKind.MODIFIED, DomainState.SHUTTING_DOWN, _pick(_SHUTDOWN, detail)
    if event == EVENT_PMSUSPENDED:
        return ChangeKind.MODIFIED, DomainState.PMSUSPENDED, DomainReason.USER
    if event == EVENT_CRASHED:
        return ChangeKind.MODIFIED, DomainState.CRASHED, DomainReason.PANICKED
    return ChangeKind.MODIFIED, DomainState.UNSPECIFIED, DomainReason.UNSPECIFIED


# virDomainState -> ours (same order up to CRASHED/PMSUSPENDED).
_STATES = (
    DomainState.UNSPECIFIED,  # NOSTATE
    DomainState.RUNNING,
    DomainState.BLOCKED,
    DomainState.PAUSED,
    DomainState.SHUTTING_DOWN,
    DomainState.SHUTOFF,
    DomainState.CRASHED,
    DomainState.PMSUSPENDED,
)
# Per-state reason tables, indexed by libvirt's per-state reason number.
_REASONS: dict[DomainState, tuple[DomainReason, ...]] = {
    DomainState.RUNNING: (
        _R.UNSPECIFIED,
        _R.BOOTED,
        _R.MIGRATED,
        _R.RESTORED,
        _R.FROM_SNAPSHOT,
        _R.UNPAUSED,
        _R.MIGRATED,
        _R.SAVED,
        _R.WAKEUP,
        _R.CRASHED,
        _R.MIGRATED,
        _R.MIGRATED,
    ),
    DomainState.PAUSED: (
        _R.UNSPECIFIED,
        _R.USER,
        _R.MIGRATED,
        _R.SAVED,
        _R.USER,
        _R.IO_ERROR,
        _R.WATCHDOG,
        _R.FROM_SNAPSHOT,
        _R.USER,
        _R.SAVED,
        _R.CRASHED,
        _R.STARTING_UP,
        _R.MIGRATED,
        _R.FAILED,
    ),
    DomainState.SHUTTING_DOWN: (_R.UNSPECIFIED, _R.USER),
    DomainState.SHUTOFF: (
        _R.UNSPECIFIED,
        _R.GUEST_SHUTDOWN,
        _R.DESTROYED,
        _R.CRASHED,
        _R.MIGRATED,
        _R.SAVED,
        _R.FAILED,
        _R.FROM_SNAPSHOT,
        _R.DESTROYED,
    ),
    DomainState.CRASHED: (_R.UNSPECIFIED, _R.PANICKED),
    DomainState.PMSUSPENDED: (_R.UNSPECIFIED,),
}


def decode_state(state: int, reason: int) -> tuple[DomainState, DomainReason]:
    """Translate ``virDomainGetState``'s (state, reason) pair."""
    ours = _STATES[state] if 0 <= state < len(_STATES) else DomainState.UNSPECIFIED
    return ours, _pick(_REASONS.get(ours, ()), reason)
