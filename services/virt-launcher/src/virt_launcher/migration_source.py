"""Live migration, source side: libvirt's peer-to-peer migration through the proxy sockets.

``Migrate`` returns at once; the migration runs in the background: libvirt's
``migrateToURI3`` holds one executor thread while a monitor samples the job every
400 ms and enforces the timeouts (upstream's ``migrationMonitor``). virt-handler's
proxy listens on the sockets in ``/var/run/kubevirt/migrationproxy`` (libvirt's own
connection, QEMU's memory stream, the NBD stream for block migration) and relays them
to the target pod. Every step lands in the launcher's migration record, which every
domain status (Notify) carries, and in the domain's metadata once no job holds it.

Pure parts (flags, parameters, the monitor's decisions) are functions and a small
class with an injected clock, so they are testable without libvirt.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import enum
import math
import os
import posixpath
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import libvirt
from kubevirt_api.migrations import FORCE_LAUNCHER_MIGRATION_FAILURE_ANNOTATION
from service_kit import get_logger
from virt_domain import KUBEVIRT_NAMESPACE, Domain
from virt_domain.launcher_pod import (
    MIGRATION_BLOCK_PORT,
    MIGRATION_MEMORY_PORT,
    migration_proxy_socket,
)
from virt_rpc import MigrationOptions

from virt_launcher.domain_manager import DomainManager
from virt_launcher.errors import DomainStateError, LibvirtError
from virt_launcher.guest import Guest
from virt_launcher.migration_record import (
    KUBEVIRT_METADATA_KEY,
    AbortStatus,
    MigrationMode,
    MigrationRecord,
    merge_into_metadata,
)
from virt_launcher.states import EVENT_UNDEFINED, DomainState, DomainStatus, LifecycleEvent

__all__ = [
    "MONITOR_PERIOD",
    "InvalidMigrationOptionsError",
    "JobSample",
    "MigrationMonitor",
    "MigrationRefusedError",
    "MigrationSettings",
    "MigrationSource",
    "MonitorAction",
    "Verdict",
    "bandwidth_mib",
    "completion_limit",
    "destination_uri",
    "disks_to_copy",
    "migration_flags",
    "migration_params",
]

_log = get_logger(__name__)

#: How often the monitor samples libvirt's job (upstream's monitorSleepPeriodMS).
MONITOR_PERIOD = 0.4
#: How long an abort waits for a migration job to show up before giving up.
_ABORT_GUARD = 30.0
_MIB = 1024 * 1024
_GIB = 1024 * _MIB


class MigrationRefusedError(Exception):
    """The request cannot start (or cancel) a migration; the message says why."""


class InvalidMigrationOptionsError(ValueError):
    """A migration option is invalid: ``field`` is its path, ``message`` why."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True)
class MigrationSettings:
    """The handler's migration options, checked (upstream's cmdclient.MigrationOptions)."""

    uid: str
    bandwidth_bytes_per_second: int = 0
    progress_timeout: int = 150
    completion_timeout_per_gib: int = 150
    allow_auto_converge: bool = False
    allow_post_copy: bool = False
    allow_workload_disruption: bool = False
    unsafe: bool = False
    block_migration: bool = False
    migrate_disks: tuple[str, ...] = ()
    parallel_threads: int = 0

    @classmethod
    def from_options(cls, options: MigrationOptions | None) -> MigrationSettings:
        """Check the wire options; raises InvalidMigrationOptionsError naming the field."""
        if options is None:
            raise InvalidMigrationOptionsError("options", "required")
        uid = options.migration_uid
        if not uid or "/" in uid or uid in (".", "..") or len(uid) > 64:
            raise InvalidMigrationOptionsError(
                "options.migration_uid", f"{uid!r} must be the migration's uid (no '/')"
            )
        for index, name in enumerate(options.migrate_disks):
            if not name or "/" in name:
                raise InvalidMigrationOptionsError(
                    f"options.migrate_disks[{index}]", f"{name!r} must be a target device (vda)"
                )
        return cls(
            uid=uid,
            bandwidth_bytes_per_second=options.bandwidth_bytes_per_second,
            progress_timeout=options.progress_timeout_seconds,
            completion_timeout_per_gib=options.completion_timeout_per_gib,
            allow_auto_converge=options.allow_auto_converge,
            allow_post_copy=options.allow_post_copy,
            allow_workload_disruption=options.allow_workload_disruption,
            unsafe=options.unsafe,
            block_migration=options.block_migration,
            migrate_disks=tuple(options.migrate_disks),
            parallel_threads=options.parallel_migration_threads,
        )


# -- what libvirt is asked ---------------------------------------------------------


def migration_flags(settings: MigrationSettings, paused: bool) -> int:
    """``migrateToURI3``'s flags: live, peer to peer, persistent on the target, plus
    what the options ask (post-copy is only *enabled*; the monitor may switch to it)."""
    flags = libvirt.VIR_MIGRATE_LIVE | libvirt.VIR_MIGRATE_PEER2PEER
    flags |= libvirt.VIR_MIGRATE_PERSIST_DEST
    if settings.block_migration:
        flags |= libvirt.VIR_MIGRATE_NON_SHARED_INC
    if settings.unsafe:
        flags |= libvirt.VIR_MIGRATE_UNSAFE
    if settings.allow_auto_converge:
        flags |= libvirt.VIR_MIGRATE_AUTO_CONVERGE
    if settings.allow_post_copy:
        flags |= libvirt.VIR_MIGRATE_POSTCOPY
    if paused:
        flags |= libvirt.VIR_MIGRATE_PAUSED
    if settings.parallel_threads > 0:
        flags |= libvirt.VIR_MIGRATE_PARALLEL
    return int(flags)


def bandwidth_mib(bytes_per_second: int) -> int:
    """libvirt's bandwidth (MiB/s) for a limit in bytes/s; 0 stays unlimited and any
    other limit is at least 1 MiB/s (rounding down to 0 would lift it)."""
    return 0 if bytes_per_second <= 0 else math.ceil(bytes_per_second / _MIB)


def _proxy_uri(proxy_dir: str, uid: str, port: int) -> str:
    return "unix://" + posixpath.join(proxy_dir, migration_proxy_socket(uid, port))


def destination_uri(proxy_dir: str, uid: str) -> str:
    """The target libvirt, reached through the proxy's socket (session mode: non-root)."""
    socket = posixpath.join(proxy_dir, migration_proxy_socket(uid))
    return f"qemu+unix:///session?socket={socket}"


def migration_params(
    settings: MigrationSettings,
    proxy_dir: str,
    domain_xml: str,
    domain_name: str,
    disks: Sequence[str],
) -> dict[str, object]:
    """``migrateToURI3``'s typed parameters: QEMU's streams on the proxy's sockets, the
    target's definition (the migratable XML, live and persistent) and the limits."""
    params: dict[str, object] = {
        libvirt.VIR_MIGRATE_PARAM_URI: _proxy_uri(proxy_dir, settings.uid, MIGRATION_MEMORY_PORT),
        libvirt.VIR_MIGRATE_PARAM_DEST_XML: domain_xml,
        libvirt.VIR_MIGRATE_PARAM_PERSIST_XML: domain_xml,
        libvirt.VIR_MIGRATE_PARAM_DEST_NAME: domain_name,
    }
    bandwidth = bandwidth_mib(settings.bandwidth_bytes_per_second)
    if bandwidth > 0:
        params[libvirt.VIR_MIGRATE_PARAM_BANDWIDTH] = bandwidth
    if settings.parallel_threads > 0:
        params[libvirt.VIR_MIGRATE_PARAM_PARALLEL_CONNECTIONS] = settings.parallel_threads
    if settings.block_migration and disks:
        params[libvirt.VIR_MIGRATE_PARAM_MIGRATE_DISKS] = list(disks)
        params[libvirt.VIR_MIGRATE_PARAM_DISKS_URI] = _proxy_uri(
            proxy_dir, settings.uid, MIGRATION_BLOCK_PORT
        )
    return params


# Volume sources whose disks are generated in each pod from the VMI (always copied, even
# read-only ones), and those on shared storage (never copied).
_GENERATED = (
    "containerDisk",
    "cloudInitNoCloud",
    "cloudInitConfigDrive",
    "configMap",
    "secret",
    "downwardAPI",
    "serviceAccount",
)
_SHARED = ("persistentVolumeClaim", "dataVolume")


def disks_to_copy(domain: Domain, vmi: Mapping[str, Any]) -> tuple[str, ...]:
    """The target devices block migration copies: file and block disks that are not
    CD-ROMs, not on shared storage, and not read-only unless generated (upstream's
    getDiskTargetsForMigration)."""
    volumes: dict[str, Mapping[str, Any]] = {}
    for volume in (vmi.get("spec") or {}).get("volumes") or ():
        if isinstance(volume, Mapping) and isinstance(volume.get("name"), str):
            volumes[volume["name"]] = volume
    copied = []
    for disk in domain.devices.disks:
        if disk.device == "cdrom" or disk.type not in ("file", "block"):
            continue
        if disk.target is None or not disk.target.dev:
            continue
        name = disk.alias.user_device if disk.alias else None
        volume = volumes.get(name or "", {})
        generated = any(key in volume for key in _GENERATED)
        host_disk = volume.get("hostDisk")
        shared = any(key in volume for key in _SHARED) or (
            isinstance(host_disk, Mapping) and host_disk.get("shared") is True
        )
        if shared or (disk.readonly and not generated):
            continue
        copied.append(disk.target.dev)
    return tuple(copied)


_UNITS = {
    "b": 1,
    "bytes": 1,
    "KB": 1000,
    "k": 1024,
    "KiB": 1024,
    "MB": 1000**2,
    "M": _MIB,
    "MiB": _MIB,
    "GB": 1000**3,
    "G": _GIB,
    "GiB": _GIB,
    "TB": 1000**4,
    "T": 1024 * _GIB,
    "TiB": 1024 * _GIB,
}


def completion_limit(per_gib: int, memory_bytes: int, local_disk_bytes: int = 0) -> int:
    """Seconds the migration may take: ``per_gib`` x the data in GiB, rounded up (guest
    memory, plus the local disks block migration copies); 0: no limit."""
    if per_gib <= 0:
        return 0
    return per_gib * max(1, math.ceil((memory_bytes + local_disk_bytes) / _GIB))


def _memory_bytes(domain: Domain) -> int:
    memory = domain.current_memory or domain.memory
    return memory.value * _UNITS.get(memory.unit or "KiB", 1024)


def _directory_bytes(path: str) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total


# -- the monitor's decisions ---------------------------------------------------------


@dataclass(frozen=True)
class JobSample:
    """One look at libvirt's job: whether a migration job runs, and what is left."""

    active: bool
    data_remaining: int | None = None

    @classmethod
    def from_stats(cls, stats: Mapping[str, object]) -> JobSample:
        """From ``virDomainGetJobStats``' answer."""
        remaining = stats.get("data_remaining")
        return cls(
            active=stats.get("type") == libvirt.VIR_DOMAIN_JOB_UNBOUNDED,
            data_remaining=remaining if isinstance(remaining, int) else None,
        )


class MonitorAction(enum.Enum):
    """What the monitor asks for after a sample."""

    CONTINUE = "continue"
    START_POST_COPY = "post-copy"
    PAUSE = "pause"
    ABORT = "abort"


@dataclass(frozen=True)
class Verdict:
    """The monitor's decision; ``reason`` explains an abort (it becomes failureReason)."""

    action: MonitorAction
    reason: str = ""


_GO_ON = Verdict(MonitorAction.CONTINUE)


class MigrationMonitor:
    """Upstream's timeouts over job samples, on a clock the caller gives (seconds).

    - post-copy: never intervenes (the target already runs the guest);
    - completion limit passed with ``allow_workload_disruption``: switch to post-copy
      if allowed, else pause the guest (and double the limit);
    - remaining data not shrinking for ``progress_timeout``: abort;
    - completion limit passed: abort.
    """

    def __init__(
        self,
        settings: MigrationSettings,
        completion_limit_seconds: int,
        started_at: float,
    ) -> None:
        self._settings = settings
        self.limit = completion_limit_seconds
        self._start = started_at
        self._last_progress = started_at
        self._watermark = 0
        self._remaining = 0
        self.mode = MigrationMode.PRE_COPY

    def observe(self, now: float, sample: JobSample) -> Verdict:
        """Take one sample; what to do now."""
        if not sample.active:
            return _GO_ON
        if sample.data_remaining is not None:
            self._remaining = sample.data_remaining
        if self._watermark == 0 or self._remaining < self._watermark:
            self._last_progress = now
        self._watermark = self._remaining
        elapsed = now - self._start
        over_limit = self.limit > 0 and elapsed > self.limit
        if self.mode is MigrationMode.POST_COPY:
            return _GO_ON
        if (
            over_limit
            and self._settings.allow_workload_disruption
            and self.mode is not MigrationMode.PAUSED
        ):
            if self._settings.allow_post_copy:
                return Verdict(MonitorAction.START_POST_COPY)
            return Verdict(MonitorAction.PAUSE)
        stuck = now - self._last_progress
        if self._settings.progress_timeout > 0 and stuck > self._settings.progress_timeout:
            return Verdict(
                MonitorAction.ABORT,
                f"Live migration stuck for {int(stuck)} seconds and has been aborted",
            )
        if over_limit:
            return Verdict(
                MonitorAction.ABORT,
                f"Live migration is not completed after {self.limit} seconds and has been aborted",
            )
        return _GO_ON

    def switched_to_post_copy(self) -> None:
        """The switch to post-copy happened."""
        self.mode = MigrationMode.POST_COPY

    def paused(self) -> None:
        """The guest was paused to let the migration finish; the limit doubles."""
        self.mode = MigrationMode.PAUSED
        self.limit *= 2


# -- running it ----------------------------------------------------------------------


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC).replace(microsecond=0)


class MigrationSource:
    """Runs this launcher's outgoing migration (one at a time, one shot per uid)."""

    def __init__(
        self,
        manager: DomainManager,
        proxy_dir: str,
        ephemeral_disk_dir: str,
        clock: Callable[[], float] | None = None,
        sleep: Callable[[float], Awaitable[object]] | None = None,
        period: float = MONITOR_PERIOD,
    ) -> None:
        self._manager = manager
        self._proxy_dir = proxy_dir
        self._ephemeral_dir = ephemeral_disk_dir
        self._clock = clock or time.monotonic
        self._sleep = sleep or asyncio.sleep
        self._period = period
        self._task: asyncio.Task[None] | None = None
        self._abort_task: asyncio.Task[None] | None = None
        # Set when an abort succeeded: the failure reason the result gets.
        self._aborted: str | None = None
        #: Set once the domain migrated away and was then deleted: the launcher's work
        #: is over (upstream's source launcher exits, so the source pod completes).
        self.departed = asyncio.Event()
        manager.add_event_hook(self._on_event)

    def _on_event(self, event: LifecycleEvent, status: DomainStatus) -> None:
        record = self._manager.migration
        if event.event == EVENT_UNDEFINED and record is not None and record.completed:
            self.departed.set()

    async def _update(self, **changes: object) -> MigrationRecord:
        current = self._manager.migration
        assert current is not None
        record = current.replace(**changes)
        await self._manager.record_migration(record)
        return record

    async def start(self, vmi: Mapping[str, Any], settings: MigrationSettings) -> None:
        """Start migrating the running domain; returns once the migration is under way.

        Asking again for the migration in progress does nothing; a finished migration's
        uid cannot run again (one shot), nor can a second one while one runs.
        """
        current = self._manager.migration
        if current is not None and current.uid == settings.uid:
            if not current.finished:
                return
            raise MigrationRefusedError(
                f"migration {settings.uid} already ran (finished {current.end}, "
                f"failed: {current.failed})"
            )
        if self._task is not None and not self._task.done():
            raise MigrationRefusedError("another migration is in progress")
        guest = await self._manager.guest()
        if guest is None or not await guest.is_active():
            raise DomainStateError("the domain does not run; there is nothing to migrate")
        await self._manager.record_migration(
            MigrationRecord(uid=settings.uid, start=_now(), mode=MigrationMode.PRE_COPY)
        )
        self._aborted = None
        self._task = asyncio.create_task(
            self._migrate(guest, vmi, settings), name=f"migration-{settings.uid}"
        )

    async def _migrate(
        self, guest: Guest, vmi: Mapping[str, Any], settings: MigrationSettings
    ) -> None:
        annotations = (vmi.get("metadata") or {}).get("annotations") or {}
        if FORCE_LAUNCHER_MIGRATION_FAILURE_ANNOTATION in annotations:
            _log.error(
                "live migration failed: forced",
                annotation=FORCE_LAUNCHER_MIGRATION_FAILURE_ANNOTATION,
            )
            await self._finish(guest, "Failed migration to satisfy functional test condition")
            return
        try:
            await self._run(guest, vmi, settings)
        except LibvirtError as exc:
            _log.error("live migration failed", error=str(exc))
            if self._aborted is None and "canceled by client" in str(exc):
                self._aborted = f"Live migration aborted: {exc}"
            await self._finish(guest, self._aborted or f"Live migration failed: {exc}")
        except Exception as exc:  # a bug must still end in a failed record, not silence
            _log.exception("live migration failed")
            await self._finish(guest, f"Live migration failed: {exc}")
        else:
            _log.info("live migration succeeded", migration=settings.uid)
            await self._finish(guest, None)

    async def _run(self, guest: Guest, vmi: Mapping[str, Any], settings: MigrationSettings) -> None:
        record = self._manager.migration
        assert record is not None
        # Written before the job holds the domain: the incoming XML carries it to the target.
        await self._persist(guest, record)
        status = await guest.status()
        domain_xml = await guest.migratable_xml()
        domain = Domain.from_xml(domain_xml)
        disks = settings.migrate_disks or disks_to_copy(domain, vmi)
        local = 0
        if settings.block_migration:
            local = await asyncio.to_thread(_directory_bytes, self._ephemeral_dir)
        limit = completion_limit(settings.completion_timeout_per_gib, _memory_bytes(domain), local)
        flags = migration_flags(settings, paused=status.state is DomainState.PAUSED)
        params = migration_params(settings, self._proxy_dir, domain_xml, guest.name, disks)
        uri = destination_uri(self._proxy_dir, settings.uid)
        _log.info(
            "migrating",
            domain=guest.name,
            uri=uri,
            flags=hex(flags),
            disks=disks,
            limit_seconds=limit,
        )
        monitor = MigrationMonitor(settings, limit, self._clock())
        job = asyncio.create_task(guest.migrate(uri, params, flags), name="migrateToURI3")
        try:
            while not job.done():
                await asyncio.wait({job}, timeout=self._period)
                if job.done():
                    break
                try:
                    sample = JobSample.from_stats(await guest.job_stats())
                except LibvirtError as exc:
                    _log.info("job stats unavailable; retrying", error=str(exc))
                    continue
                await self._act(guest, monitor, monitor.observe(self._clock(), sample))
        finally:
            if not job.done():
                job.cancel()
        job.result()

    async def _act(self, guest: Guest, monitor: MigrationMonitor, verdict: Verdict) -> None:
        try:
            if verdict.action is MonitorAction.START_POST_COPY:
                _log.info("starting post-copy")
                await guest.start_post_copy()
                monitor.switched_to_post_copy()
                await self._update(mode=MigrationMode.POST_COPY)
            elif verdict.action is MonitorAction.PAUSE:
                _log.info("pausing the guest so the migration can complete")
                await guest.pause()
                monitor.paused()
                await self._update(mode=MigrationMode.PAUSED)
            elif verdict.action is MonitorAction.ABORT:
                _log.error("migration stopped", reason=verdict.reason)
                await guest.abort_job()
                self._aborted = verdict.reason
                await self._update(abort_status=AbortStatus.SUCCEEDED)
        except LibvirtError as exc:
            # Upstream's habit: the next sample decides again.
            _log.warning("migration action failed", action=verdict.action.value, error=str(exc))

    async def _finish(self, guest: Guest, failure: str | None) -> None:
        record = self._manager.migration
        assert record is not None
        if failure is None:
            abort = record.abort_status
            if abort is AbortStatus.IN_PROGRESS:
                abort = AbortStatus.FAILED  # too late: the guest moved anyway
            record = record.replace(completed=True, end=_now(), abort_status=abort)
        else:
            abort = record.abort_status
            if abort is AbortStatus.IN_PROGRESS or (
                abort is AbortStatus.NONE and self._aborted is not None
            ):
                abort = AbortStatus.SUCCEEDED
            record = record.replace(
                failed=True, failure_reason=failure, end=_now(), abort_status=abort
            )
        await self._manager.record_migration(record)
        await self._persist(guest, record)

    async def _persist(self, guest: Guest, record: MigrationRecord) -> None:
        # Best effort: the in-memory record is what Notify reports.
        try:
            current = await guest.metadata_element(KUBEVIRT_NAMESPACE)
            element = merge_into_metadata(current, record)
            await guest.set_metadata_element(element, KUBEVIRT_METADATA_KEY, KUBEVIRT_NAMESPACE)
        except LibvirtError as exc:
            _log.warning("could not write the migration into the domain metadata", error=str(exc))

    async def cancel(self) -> None:
        """Abort the running migration; returns once the abort is under way.

        abort_status goes InProgress, then Succeeded (the guest stays here) or Failed.
        """
        record = self._manager.migration
        if record is None or record.finished or record.start is None:
            raise MigrationRefusedError("failed to cancel migration: the VMI is not migrating")
        if record.abort_status is AbortStatus.IN_PROGRESS:
            return
        await self._update(abort_status=AbortStatus.IN_PROGRESS)
        self._abort_task = asyncio.create_task(self._abort(), name="migration-abort")

    async def _abort(self) -> None:
        deadline = self._clock() + _ABORT_GUARD
        guest = await self._manager.guest()
        while guest is not None and self._clock() < deadline:
            if self._task is None or self._task.done():
                return  # finished meanwhile: _finish settled the abort status
            try:
                sample = JobSample.from_stats(await guest.job_stats())
                if sample.active:
                    await guest.abort_job()
                    self._aborted = "Live migration aborted"
                    _log.info("live migration abort succeeded")
                    return
            except LibvirtError as exc:
                _log.error("cancelling the migration failed", error=str(exc))
                break
            await self._sleep(self._period)
        await self._update(abort_status=AbortStatus.FAILED)

    async def wait(self) -> None:
        """Return once the running migration (if any) has its result (for tests, shutdown)."""
        for task in (self._task, self._abort_task):
            if task is not None:
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def close(self) -> None:
        """Stop watching (the libvirt job itself ends with libvirtd)."""
        for task in (self._task, self._abort_task):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
