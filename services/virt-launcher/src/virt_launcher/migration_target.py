"""Live migration, target side: get ready for the incoming domain and tell when it landed.

``PrepareMigrationTarget`` defines nothing: the builder has written the disks' files
(overlays, emptyDisks, blank ISOs of the right sizes) at the paths the source's domain
names, and this module makes the proxy directory (owned by QEMU's user: the target
QEMU listens there) and arms the watch. libvirt then creates the domain as incoming;
on its first lifecycle event the watch waits until no incoming migration job remains
(upstream's TargetMigrationMonitor: the guest may run before the job is over), takes
the migration record the incoming XML carried, sets its end and reports it.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import os
import time
from collections.abc import Awaitable, Callable

import libvirt
from service_kit import get_logger
from virt_domain import KUBEVIRT_NAMESPACE

from virt_launcher.domain_manager import DomainManager
from virt_launcher.errors import DomainNotFoundError, LibvirtError
from virt_launcher.migration_record import (
    KUBEVIRT_METADATA_KEY,
    MigrationRecord,
    merge_into_metadata,
    record_from_metadata,
)
from virt_launcher.states import EVENT_UNDEFINED, DomainState, DomainStatus, LifecycleEvent

__all__ = ["MigrationTarget", "prepare_proxy_dir"]

_log = get_logger(__name__)

#: How often the job is polled once the domain is there, and for how long at most.
_POLL = 0.1
_JOB_WAIT = 600.0


def prepare_proxy_dir(path: str, owner: tuple[int, int] | None) -> None:
    """Make the migration proxy directory, owned by QEMU's user (``owner``; None: ours).

    A symlink there is refused, never followed. Blocking: run it in a thread.
    """
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o750)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        if owner is not None:
            os.fchown(fd, *owner)
        os.fchmod(fd, 0o750)
    finally:
        os.close(fd)


class MigrationTarget:
    """Watches for this launcher's incoming domain once prepared."""

    def __init__(
        self,
        manager: DomainManager,
        proxy_dir: str,
        qemu_owner: tuple[int, int] | None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> None:
        self._manager = manager
        self._proxy_dir = proxy_dir
        self._owner = qemu_owner
        self._clock = clock
        self._sleep = sleep
        self.prepared = False
        self._watch: asyncio.Task[None] | None = None
        manager.add_event_hook(self._on_event)

    async def prepare(self, domain_xml: str) -> None:
        """Be the target of the domain ``domain_xml`` describes (idempotent)."""
        await asyncio.to_thread(prepare_proxy_dir, self._proxy_dir, self._owner)
        self._manager.expect_domain(domain_xml)
        self.prepared = True

    def _on_event(self, event: LifecycleEvent, status: DomainStatus) -> None:
        if not self.prepared or event.event == EVENT_UNDEFINED:
            return
        if self._watch is None and status.state is not DomainState.SHUTOFF:
            self._watch = asyncio.create_task(self._await_landing(), name="incoming-migration")

    async def _await_landing(self) -> None:
        guest = await self._manager.guest()
        if guest is None:
            self._watch = None
            return
        deadline = self._clock() + _JOB_WAIT
        while self._clock() < deadline:
            try:
                stats = await guest.job_stats()
            except DomainNotFoundError:
                break  # the incoming migration failed: libvirt removed the domain
            except LibvirtError as exc:
                _log.info("incoming job unknown; asking again", error=str(exc))
            else:
                incoming = stats.get("operation") == libvirt.VIR_DOMAIN_JOB_OPERATION_MIGRATION_IN
                if stats.get("type") == libvirt.VIR_DOMAIN_JOB_NONE or not incoming:
                    break
            await self._sleep(_POLL)
        status = await self._manager.status()
        if status is None or status.state in (DomainState.SHUTOFF, DomainState.CRASHED):
            # The incoming migration failed and libvirt removed the domain: nothing landed,
            # and a retry (a new target launcher upstream) may come.
            _log.warning("the incoming domain is gone; no migration landed")
            self._watch = None
            return
        element = None
        with contextlib.suppress(LibvirtError):
            element = await guest.metadata_element(KUBEVIRT_NAMESPACE)
        record = (record_from_metadata(element) if element else None) or MigrationRecord(uid="")
        if record.end is None:
            record = record.replace(end=datetime.datetime.now(datetime.UTC).replace(microsecond=0))
        with contextlib.suppress(LibvirtError):
            await guest.set_metadata_element(
                merge_into_metadata(element, record), KUBEVIRT_METADATA_KEY, KUBEVIRT_NAMESPACE
            )
        _log.info("incoming migration landed", migration=record.uid)
        await self._manager.record_migration(record)

    async def finalize(self) -> None:
        """Finish the move once the handler saw the guest run here (idempotent).

        Upstream resyncs the guest's clock through the guest agent here; this launcher
        has no agent channel to do it with, so there is nothing left to do.
        """
        return None

    async def wait(self) -> None:
        """Return once the watch of the incoming domain (if any) has ended."""
        while self._watch is not None and not self._watch.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(self._watch)

    async def close(self) -> None:
        """Stop watching."""
        if self._watch is not None and not self._watch.done():
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch
