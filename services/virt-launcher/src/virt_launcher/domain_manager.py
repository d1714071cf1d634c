"""Drives the launcher's one domain and turns libvirt events into domain changes.

A sync of the running domain attaches the hotplugged disks the new domain XML has and
the live one lacks, and detaches those it no longer has (`virt_launcher.hotplug`).

libvirt callbacks only enqueue; one worker task decodes them. A STOPPED event is
held back for ``reboot_window`` seconds and dropped when the domain starts again
within it, so a reboot done as stop-and-start is never reported as a stop. Stops
the launcher causes itself (kill, grace period exceeded) are reported at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import enum
from collections.abc import Callable
from dataclasses import dataclass

from service_kit import get_logger
from virt_domain import Disk, format_xml
from virt_domain.launcher_pod import HOTPLUG_DISKS

from virt_launcher.errors import DomainNotFoundError, DomainStateError, LibvirtError
from virt_launcher.guest import Guest
from virt_launcher.host import Host
from virt_launcher.hotplug import hotplug_changes
from virt_launcher.memory_dump_record import MemoryDumpRecord
from virt_launcher.migration_record import MigrationRecord
from virt_launcher.states import (
    EVENT_DEFINED,
    EVENT_STARTED,
    EVENT_STOPPED,
    ChangeKind,
    DomainChange,
    DomainReason,
    DomainState,
    DomainStatus,
    GuestDisk,
    GuestNic,
    LifecycleEvent,
    decode_lifecycle,
    guest_disks,
    guest_nics,
)

__all__ = ["DomainManager", "Notice", "NoticeType"]

_log = get_logger(__name__)


class NoticeType(enum.Enum):
    """Kubernetes event types."""

    NORMAL = "Normal"
    WARNING = "Warning"


@dataclass(frozen=True)
class Notice:
    """Something worth a Kubernetes event on the VMI (reason is CamelCase)."""

    type: NoticeType
    reason: str
    message: str


class DomainManager:
    """Owns the domain named ``domain_name`` on ``host``; serialises every command."""

    def __init__(
        self,
        host: Host,
        domain_name: str,
        reboot_window: float = 2.0,
        *,
        hotplug_dir: str = HOTPLUG_DISKS.mount_path,
    ) -> None:
        self._host = host
        self.domain_name = domain_name
        self._reboot_window = reboot_window
        # Disks with their source here are hotplugged: attached and detached by sync.
        self._hotplug_dir = hotplug_dir
        self._events: asyncio.Queue[LifecycleEvent] = asyncio.Queue()
        self._subscribers: list[asyncio.Queue[DomainChange | Notice]] = []
        self._sequence = 0
        self._lock = asyncio.Lock()
        self._worker: asyncio.Task[None] | None = None
        self._grace_task: asyncio.Task[None] | None = None
        self._pending_stop: tuple[asyncio.TimerHandle, ChangeKind, DomainStatus] | None = None
        self._expect_stop = False
        self._stopped = asyncio.Event()
        self.connection_lost = asyncio.Event()
        self.last_status: DomainStatus | None = None
        # The guest interfaces of the domain XML last synced: every status carries them.
        self._nics: tuple[GuestNic, ...] = ()
        # The disks of the running domain as last read (hotplugged ones once attached).
        self._disks: tuple[GuestDisk, ...] = ()
        # The live migration in or out of this launcher (its record rides on every status).
        self.migration: MigrationRecord | None = None
        # The last memory dump started here (its record rides on every status too).
        self.memory_dump: MemoryDumpRecord | None = None
        # Set once the launcher's pod is being stopped; rides on every status from then.
        self.pod_stopping = False
        self._event_hooks: list[Callable[[LifecycleEvent, DomainStatus], None]] = []

    # -- lifecycle of the manager itself -------------------------------------------

    async def start(self) -> None:
        """Connect to libvirt and start handling its events."""
        await self._host.connect(self._events.put_nowait, self._on_close)
        self._worker = asyncio.create_task(self._handle_events(), name="domain-events")
        guest = await self._host.lookup(self.domain_name)
        if guest is not None:
            self.last_status = await guest.status()

    async def stop(self) -> None:
        """Stop handling events and close the connection (the domain is left as is)."""
        for task in (self._worker, self._grace_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if self._pending_stop is not None:
            self._pending_stop[0].cancel()
        await self._host.close()

    def _on_close(self, reason: str) -> None:
        self.connection_lost.set()
        self._notify(Notice(NoticeType.WARNING, "LibvirtConnectionLost", reason))

    # -- subscribers -------------------------------------------------------------

    def subscribe(self) -> asyncio.Queue[DomainChange | Notice]:
        """A queue that receives every change and notice from now on."""
        queue: asyncio.Queue[DomainChange | Notice] = asyncio.Queue()
        self._subscribers.append(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[DomainChange | Notice]) -> None:
        """Stop delivering to ``queue``."""
        with contextlib.suppress(ValueError):
            self._subscribers.remove(queue)

    def _notify(self, item: DomainChange | Notice) -> None:
        for queue in self._subscribers:
            queue.put_nowait(item)

    def republish(self) -> None:
        """Report the last status again: something beside the state changed (the guest
        agent's report, which the Notify pusher adds)."""
        if self.last_status is not None:
            self._publish(ChangeKind.MODIFIED, self.last_status)

    def _with_nics(self, status: DomainStatus) -> DomainStatus:
        return dataclasses.replace(
            status,
            interfaces=self._nics,
            disks=self._disks,
            migration=self.migration,
            memory_dump=self.memory_dump,
            pod_stopping=self.pod_stopping,
        )

    def add_event_hook(self, hook: Callable[[LifecycleEvent, DomainStatus], None]) -> None:
        """Call ``hook`` (on the loop; it must not block) with every lifecycle event of
        the domain and the status it means, before the change is published."""
        self._event_hooks.append(hook)

    def expect_domain(self, domain_xml: str) -> None:
        """The domain will appear without a sync (an incoming migration): its statuses
        carry the interfaces and disks of ``domain_xml``."""
        self._nics = guest_nics(domain_xml)
        self._disks = guest_disks(domain_xml)

    async def record_migration(self, record: MigrationRecord) -> None:
        """Keep ``record`` and report it at once with the domain's current state."""
        self.migration = record
        await self._report_current()

    async def record_memory_dump(self, record: MemoryDumpRecord) -> None:
        """Keep ``record`` and report it at once with the domain's current state."""
        self.memory_dump = record
        await self._report_current()

    async def _report_current(self) -> None:
        try:
            status = await self.status()
        except LibvirtError:
            status = self.last_status
        if status is None:
            return
        self._publish(ChangeKind.MODIFIED, status)

    def _publish(self, kind: ChangeKind, status: DomainStatus) -> None:
        status = self._with_nics(status)
        self._sequence += 1
        self.last_status = status
        # A hint only (events lag behind libvirt): waiters confirm with libvirt itself.
        if kind is ChangeKind.MODIFIED and status.state in (
            DomainState.SHUTOFF,
            DomainState.CRASHED,
        ):
            self._stopped.set()
        self._notify(DomainChange(kind=kind, status=status, sequence=self._sequence))

    # -- events ------------------------------------------------------------------

    async def _handle_events(self) -> None:
        while True:
            event = await self._events.get()
            if event.name != self.domain_name:
                continue
            kind, state, reason = decode_lifecycle(event.event, event.detail)
            status = DomainStatus(event.name, event.uuid, state, reason)
            for hook in self._event_hooks:
                hook(event, status)
            # Migrated away is never a reboot: reported at once, like stops we cause.
            migrated = reason is DomainReason.MIGRATED
            if event.event == EVENT_STOPPED and not self._expect_stop and not migrated:
                self._hold_stop(kind, status)
                continue
            if event.event == EVENT_STARTED and self._pending_stop is not None:
                # Stopped and started again within the window: a reboot, not a stop.
                self._pending_stop[0].cancel()
                self._pending_stop = None
            else:
                self._flush_stop()
            if event.event == EVENT_STOPPED:
                self._expect_stop = False
            if event.event == EVENT_DEFINED and kind is ChangeKind.MODIFIED:
                status = await self._current_status(status)
            self._publish(kind, status)

    def _hold_stop(self, kind: ChangeKind, status: DomainStatus) -> None:
        self._flush_stop()
        loop = asyncio.get_running_loop()
        handle = loop.call_later(self._reboot_window, self._release_stop, kind, status)
        self._pending_stop = (handle, kind, status)

    def _release_stop(self, kind: ChangeKind, status: DomainStatus) -> None:
        self._pending_stop = None
        self._publish(kind, status)

    def _flush_stop(self) -> None:
        # A held stop followed by anything but a start is a real stop: report it first.
        pending, self._pending_stop = self._pending_stop, None
        if pending is not None:
            handle, kind, status = pending
            handle.cancel()
            self._publish(kind, status)

    async def _current_status(self, fallback: DomainStatus) -> DomainStatus:
        try:
            guest = await self._host.lookup(self.domain_name)
            return fallback if guest is None else await guest.status()
        except LibvirtError:
            # The event still gets reported; only its state is less precise.
            return fallback

    # -- commands ----------------------------------------------------------------

    async def _guest(self) -> Guest:
        guest = await self._host.lookup(self.domain_name)
        if guest is None:
            raise DomainNotFoundError(f"domain {self.domain_name} is not defined")
        return guest

    async def guest(self) -> Guest | None:
        """The domain's handle, or None when it is not defined; for work that runs beside
        the commands (a migration holds no lock: it lasts minutes and may be cancelled)."""
        return await self._host.lookup(self.domain_name)

    async def sync(self, domain_xml: str) -> DomainStatus:
        """Define the domain if needed and make sure it runs; a running domain is kept.

        Refused (DomainStateError) once the domain migrated away from this launcher.
        """
        async with self._lock:
            if self.migration is not None and self.migration.completed:
                # Started again here, the guest would run twice (here and on the target).
                raise DomainStateError(
                    f"domain {self.domain_name} migrated away (migration "
                    f"{self.migration.uid}); this launcher does not start it again"
                )
            self._nics = guest_nics(domain_xml)
            guest = await self._host.lookup(self.domain_name)
            if guest is not None and await guest.is_active():
                if await self._sync_hotplug(guest, domain_xml):
                    status = await guest.status()
                    # Notify's watchers learn of the disks too, not only this caller.
                    self._publish(ChangeKind.MODIFIED, status)
                    return self._with_nics(status)
                return self._with_nics(await guest.status())
            guest = await self._host.define(domain_xml)
            if guest.name != self.domain_name:
                await guest.undefine()
                raise DomainStateError(
                    f"domain XML names {guest.name!r}, this launcher serves {self.domain_name!r}"
                )
            await guest.launch()
            self._disks = guest_disks(domain_xml)
            return self._with_nics(await guest.status())

    async def _sync_hotplug(self, guest: Guest, domain_xml: str) -> bool:
        """Detach the running domain's hotplugged disks that ``domain_xml`` lacks, attach
        those it adds; whether anything changed. Stops at the first libvirt error (raised);
        the disks reported are the live domain's either way."""
        live = await guest.xml()
        changes = hotplug_changes(live, domain_xml, self._hotplug_dir)
        try:
            for disk in changes.detach:
                _log.info("detaching a hotplugged disk", disk=_disk_name(disk))
                await guest.detach_disk(format_xml(disk))
            for disk in changes.attach:
                _log.info("attaching a hotplugged disk", disk=_disk_name(disk))
                await guest.attach_disk(format_xml(disk))
        finally:
            if changes:
                with contextlib.suppress(LibvirtError):
                    live = await guest.xml()
            self._disks = guest_disks(live)
        return bool(changes)

    async def pause(self) -> DomainStatus:
        """Pause the running guest."""
        async with self._lock:
            guest = await self._guest()
            await guest.pause()
            return await guest.status()

    async def unpause(self) -> DomainStatus:
        """Resume the paused guest."""
        async with self._lock:
            guest = await self._guest()
            await guest.resume()
            return await guest.status()

    async def soft_reboot(self, via_agent: bool = False) -> DomainStatus:
        """Ask the guest to reboot itself (through its agent, when it has one connected)."""
        async with self._lock:
            guest = await self._guest()
            await guest.reboot(via_agent)
            return await guest.status()

    async def reset(self) -> DomainStatus:
        """Hard-reset the guest."""
        async with self._lock:
            guest = await self._guest()
            await guest.reset()
            return await guest.status()

    async def kill(self) -> DomainStatus:
        """Destroy the domain at once; a stopped domain stays stopped."""
        async with self._lock:
            guest = await self._guest()
            if await guest.is_active():
                await self._destroy(guest)
            return await guest.status()

    async def delete(self) -> None:
        """Undefine the domain; a running domain is destroyed first."""
        async with self._lock:
            guest = await self._host.lookup(self.domain_name)
            if guest is None:
                return
            if await guest.is_active():
                await self._destroy(guest)
            await guest.undefine()

    async def shutdown(self, grace_period: float) -> DomainStatus:
        """Ask the guest to power off; destroy it if it is still up after the grace period.

        Returns once the request is made; the grace period runs in the background.
        A grace period of 0 destroys at once. A paused guest cannot power off, so
        shutting it down with a grace period raises DomainStateError.
        """
        async with self._lock:
            guest = await self._guest()
            current = await guest.status()
            if current.state is DomainState.SHUTOFF:
                return current
            if current.state is DomainState.PAUSED and grace_period > 0:
                raise DomainStateError(
                    f"domain {guest.name} is paused and cannot power off; unpause or kill it"
                )
            if grace_period <= 0:
                await self._destroy(guest)
                return await guest.status()
            await guest.shutdown()
            if self._grace_task is None or self._grace_task.done():
                self._grace_task = asyncio.create_task(
                    self._enforce_grace(grace_period), name="grace-period"
                )
            return await guest.status()

    async def _enforce_grace(self, grace_period: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.wait_stopped(), timeout=grace_period)
            return
        async with self._lock:
            guest = await self._host.lookup(self.domain_name)
            if guest is None or not await guest.is_active():
                return
            _log.warning(
                "the guest did not power off in its grace period; destroying it",
                domain=guest.name,
                grace_period=grace_period,
            )
            self._notify(
                Notice(
                    NoticeType.WARNING,
                    "ShutdownGracePeriodExceeded",
                    f"the guest did not power off within {grace_period:g}s; destroying it",
                )
            )
            await self._destroy(guest)

    async def _destroy(self, guest: Guest) -> None:
        # A stop we cause is no reboot: report it at once instead of holding it back.
        self._expect_stop = True
        try:
            await guest.destroy()
        except BaseException:
            self._expect_stop = False
            raise

    async def wait_stopped(self) -> None:
        """Return once the domain is not running (shut off, crashed, or not defined)."""
        while True:
            # Cleared before asking libvirt, so a stop reported meanwhile still wakes us;
            # a stale wake-up only costs another question to libvirt.
            self._stopped.clear()
            guest = await self._host.lookup(self.domain_name)
            if guest is None or not await guest.is_active():
                return
            await self._stopped.wait()

    async def status(self) -> DomainStatus | None:
        """The domain's current state, or None when it is not defined."""
        guest = await self._host.lookup(self.domain_name)
        return None if guest is None else self._with_nics(await guest.status())

    async def stats(self) -> tuple[dict[str, object], str] | None:
        """libvirt's statistics (its job's under ``job.*``) and the live XML of the running
        domain, or None."""
        guest = await self._host.lookup(self.domain_name)
        if guest is None or not await guest.is_active():
            return None
        raw = await guest.stats()
        try:
            job = await guest.job_stats()
        except LibvirtError:
            job = {}  # a driver without job statistics: no migration figures
        raw.update({f"job.{key}": value for key, value in job.items()})
        return raw, await guest.xml()

    async def domain_xml(self) -> str | None:
        """The domain's live XML, or None when it is not defined."""
        guest = await self._host.lookup(self.domain_name)
        return None if guest is None else await guest.xml()

    async def hypervisor_version(self) -> str:
        """QEMU's version (or the driver's) as ``major.minor.micro``."""
        return await self._host.hypervisor_version()


def _disk_name(disk: Disk) -> str:
    name = disk.alias.user_device if disk.alias is not None else None
    return name or (disk.target.dev or "" if disk.target is not None else "")
