"""The ``MemoryDump`` command: libvirt's memory-only core dump into a memoryDump volume.

virt-handler binds the memoryDump volume's claim directory at
``<hotplug-disks dir>/<volume>/`` and asks for ``<that dir>/<file>.memory.dump``
(`kubevirt_api.memorydump.dump_file_name`). As upstream's StorageManager.MemoryDump: the
request returns at once; in the background the older dumps in that directory are
removed and libvirt writes the new one; the result lands in the record every domain
status carries (`virt_launcher.memory_dump_record`), and a domain change is published
so Notify tells virt-handler. Asking again for the file just dumped (or being dumped)
does nothing; one dump runs at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import os
import posixpath
import stat
from collections.abc import Callable
from dataclasses import dataclass

from kubevirt_api.memorydump import DUMP_SUFFIX
from service_kit import get_logger
from virt_domain.launcher_pod import HOTPLUG_DISKS

from virt_launcher.domain_manager import DomainManager
from virt_launcher.errors import DomainNotFoundError, DomainStateError, LibvirtError
from virt_launcher.guest import Guest
from virt_launcher.memory_dump_record import DUMP_FAILED, MemoryDumpRecord

__all__ = [
    "DumpTarget",
    "InvalidDumpPathError",
    "MemoryDumper",
    "check_dump_directory",
    "dump_target",
    "remove_old_dumps",
]

_log = get_logger(__name__)


class InvalidDumpPathError(ValueError):
    """The requested dump path is not one the launcher writes; the message says why."""


@dataclass(frozen=True, slots=True)
class DumpTarget:
    """Where one dump goes: ``<hotplug dir>/<volume>/<file_name>``."""

    path: str
    volume: str
    file_name: str

    @property
    def directory(self) -> str:
        """The volume's claim directory (the dump's parent)."""
        return posixpath.dirname(self.path)


def dump_target(dump_path: str, hotplug_dir: str = HOTPLUG_DISKS.mount_path) -> DumpTarget:
    """The dump a path names, checked without touching the filesystem.

    Raises InvalidDumpPathError unless ``dump_path`` is exactly
    ``<hotplug_dir>/<volume>/<file>`` (absolute, normalised, no ``..``), the file's
    name ending with DUMP_SUFFIX.
    """
    if not dump_path:
        raise InvalidDumpPathError("required: the absolute path of the dump file")
    if "\0" in dump_path:
        raise InvalidDumpPathError(f"{dump_path!r} contains a NUL byte")
    if not posixpath.isabs(dump_path):
        raise InvalidDumpPathError(f"{dump_path!r} must be an absolute path")
    if ".." in dump_path.split("/"):
        raise InvalidDumpPathError(f"{dump_path!r} must not contain '..'")
    # normpath keeps a leading '//', which names the same directory as '/'.
    if posixpath.normpath(dump_path) != dump_path or dump_path.startswith("//"):
        raise InvalidDumpPathError(
            f"{dump_path!r} must be normalised (no '.', '//' or trailing '/')"
        )
    directory, file_name = posixpath.split(dump_path)
    parent, volume = posixpath.split(directory)
    if parent != posixpath.normpath(hotplug_dir) or not volume:
        raise InvalidDumpPathError(
            f"{dump_path!r} must be {hotplug_dir}/<volume>/<file>{DUMP_SUFFIX}, "
            "in the memoryDump volume's directory"
        )
    if not file_name.endswith(DUMP_SUFFIX) or file_name == DUMP_SUFFIX:
        raise InvalidDumpPathError(f"{dump_path!r}: the file's name must end with {DUMP_SUFFIX}")
    return DumpTarget(dump_path, volume, file_name)


def check_dump_directory(target: DumpTarget) -> None:
    """Refuse a dump whose directory is missing or not a directory (symlinks are not
    followed), or whose file exists as anything but a regular file. Blocking."""
    try:
        found = os.lstat(target.directory)
    except FileNotFoundError:
        raise InvalidDumpPathError(
            f"{target.directory} does not exist (the memoryDump volume "
            f"{target.volume!r} is not bound into the launcher)"
        ) from None
    if not stat.S_ISDIR(found.st_mode):
        raise InvalidDumpPathError(
            f"{target.directory} is not a directory (symlinks are not followed)"
        )
    try:
        existing = os.lstat(target.path)
    except FileNotFoundError:
        return
    # libvirt opens the path following links: only a plain file may be overwritten.
    if not stat.S_ISREG(existing.st_mode):
        raise InvalidDumpPathError(f"{target.path} exists and is not a regular file")


def remove_old_dumps(directory: str) -> list[str]:
    """Remove the regular ``*`` + DUMP_SUFFIX files in ``directory``; their names.

    Links and other entries stay; nothing is followed (the directory is opened with
    O_NOFOLLOW and every removal is relative to it). Failures are logged, not raised:
    as upstream, the dump is tried anyway. Blocking.
    """
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        _log.error("failed to remove older memory dumps", directory=directory, error=str(exc))
        return []
    removed: list[str] = []
    try:
        with os.scandir(fd) as entries:
            for entry in entries:
                if not entry.name.endswith(DUMP_SUFFIX):
                    continue
                if not entry.is_file(follow_symlinks=False):
                    continue
                try:
                    os.unlink(entry.name, dir_fd=fd)
                except FileNotFoundError:
                    continue
                except OSError as exc:
                    _log.error(
                        "failed to remove an older memory dump", file=entry.name, error=str(exc)
                    )
                    continue
                removed.append(entry.name)
    finally:
        os.close(fd)
    return removed


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC).replace(microsecond=0)


class MemoryDumper:
    """Runs this launcher's memory dumps (one at a time) for ``manager``'s domain."""

    def __init__(
        self,
        manager: DomainManager,
        hotplug_dir: str = HOTPLUG_DISKS.mount_path,
        clock: Callable[[], datetime.datetime] = _now,
    ) -> None:
        self._manager = manager
        self._hotplug_dir = hotplug_dir
        self._clock = clock
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None

    async def start(self, dump_path: str) -> None:
        """Start dumping the running domain's memory to ``dump_path``; returns once the
        dump is recorded as started (or when nothing is to be done).

        Raises InvalidDumpPathError for a path the launcher does not write,
        DomainNotFoundError/DomainStateError when no domain runs. A request for the
        recorded dump's file does nothing, nor does one while another dump runs (the
        record still names that one: the caller asks again later).
        """
        target = dump_target(dump_path, self._hotplug_dir)
        async with self._lock:
            current = self._manager.memory_dump
            if current is not None and current.file_name == target.file_name:
                return  # in progress or just done: upstream's shouldSkipMemoryDump
            if self._task is not None and not self._task.done():
                _log.info(
                    "a memory dump is in progress; not starting another",
                    running=current.file_name if current is not None else "",
                    requested=target.file_name,
                )
                return
            await asyncio.to_thread(check_dump_directory, target)
            guest = await self._manager.guest()
            if guest is None:
                raise DomainNotFoundError(
                    f"domain {self._manager.domain_name} is not defined; nothing to dump"
                )
            if not await guest.is_active():
                raise DomainStateError(
                    f"domain {self._manager.domain_name} does not run; nothing to dump"
                )
            record = MemoryDumpRecord(file_name=target.file_name, start=self._clock())
            await self._manager.record_memory_dump(record)
            self._task = asyncio.create_task(
                self._dump(guest, target, record), name=f"memory-dump-{target.volume}"
            )

    async def _dump(self, guest: Guest, target: DumpTarget, record: MemoryDumpRecord) -> None:
        failure: str | None = None
        try:
            removed = await asyncio.to_thread(remove_old_dumps, target.directory)
            if removed:
                _log.info("removed older memory dumps", files=removed)
            _log.info("starting memory dump", file=target.path)
            await guest.dump_memory(target.path)
        except LibvirtError as exc:
            failure = f"{DUMP_FAILED}: {exc}"
        except Exception as exc:  # a bug must still end in a failed record, not silence
            _log.exception("memory dump failed")
            failure = f"{DUMP_FAILED}: {exc}"
        if failure is None:
            _log.info("completed memory dump successfully", file=target.path)
        else:
            _log.error("memory dump failed", file=target.path, reason=failure)
        await self._manager.record_memory_dump(record.finish(self._clock(), failure))

    async def wait(self) -> None:
        """Return once the running dump (if any) has its result (for tests, shutdown)."""
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def close(self) -> None:
        """Stop waiting for the running dump (libvirt's job itself ends with libvirtd)."""
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
