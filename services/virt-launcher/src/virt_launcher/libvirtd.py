"""Runs a private, unprivileged libvirtd (session mode) for the launcher's one domain.

Everything libvirtd writes lives under one directory: its config, its socket, the
QEMU driver's state and cache, and its log. libvirtd runs with the launcher's own
(non-root) uid, or, when the launcher runs as root, as the unprivileged ``user``
given to it (libvirtd as root would need a ``libvirt-qemu`` account). It runs in a
process group of its own, so stopping it also ends the virtlogd it spawns.

`Libvirtd` starts it, or takes over one that `virt_launcher.libvirtd_start` already
started before the event loop ran (the launcher's head start), and supervises it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Protocol

from virt_rpc import SocketPathError, check_length, socket_stat

from virt_launcher.libvirtd_start import (
    DEFAULT_LOG_FILTERS,
    LibvirtdError,
    LibvirtdPaths,
    libvirtd_command,
    prepare_files,
)

__all__ = ["Libvirtd", "LibvirtdError", "LibvirtdPaths", "end_process"]


def _socket_ready(path: Path) -> bool:
    return socket_stat(path) is not None


def _virtlogd_pid(paths: LibvirtdPaths) -> int | None:
    # Only a pid whose process really is a virtlogd of ours: pid files can be stale.
    pid_file = paths.root / "run" / "libvirt" / "virtlogd.pid"
    try:
        pid = int(pid_file.read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        uid = os.stat(f"/proc/{pid}").st_uid
    except (OSError, ValueError):
        return None
    if b"virtlogd" not in cmdline or uid != os.stat(paths.root).st_uid:
        return None
    return pid


async def end_process(pid: int, grace: float) -> None:
    """SIGTERM `pid` (not necessarily our child) and wait until it has exited; SIGKILL
    after `grace` seconds. Through a pidfd, so a reused pid is never signalled."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    loop = asyncio.get_running_loop()
    exited: asyncio.Future[None] = loop.create_future()

    def readable() -> None:  # a pidfd turns readable when its process exits
        if not exited.done():
            exited.set_result(None)

    loop.add_reader(fd, readable)
    try:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            signal.pidfd_send_signal(fd, signal.SIGTERM)
        try:
            await asyncio.wait_for(asyncio.shield(exited), grace)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError, PermissionError, TimeoutError):
                signal.pidfd_send_signal(fd, signal.SIGKILL)
                await asyncio.wait_for(exited, grace)
    finally:
        loop.remove_reader(fd)
        os.close(fd)


def _log_tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


class _Child(Protocol):
    """What supervision needs of libvirtd's process, however it was started."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None: ...

    async def wait(self) -> int: ...


class _AdoptedChild:
    """A child started with `subprocess.Popen` before the loop ran, waited for through a
    pidfd on the loop (asyncio's own child watching knows only the children it started)."""

    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        self._popen = popen
        # Opened while the child cannot have been reaped yet, so it is this very process.
        self._pidfd = os.pidfd_open(popen.pid)
        self._exited: asyncio.Event | None = None

    @property
    def pid(self) -> int:
        return self._popen.pid

    @property
    def returncode(self) -> int | None:
        return self._popen.poll()  # waitpid with WNOHANG: it reaps, never blocks

    async def wait(self) -> int:
        if self._exited is None:
            self._exited = asyncio.Event()
            if self.returncode is None:
                asyncio.get_running_loop().add_reader(self._pidfd, self._on_exit)
            else:
                self._on_exit()
        await self._exited.wait()
        code = self.returncode
        while code is None:  # the pidfd turned readable: the exit status is there
            await asyncio.sleep(0.01)
            code = self.returncode
        return code

    def _on_exit(self) -> None:
        with contextlib.suppress(ValueError, RuntimeError):
            asyncio.get_running_loop().remove_reader(self._pidfd)
        os.close(self._pidfd)
        if self._exited is not None:
            self._exited.set()


class Libvirtd:
    """A supervised libvirtd process with its files under ``paths.root``."""

    def __init__(
        self,
        paths: LibvirtdPaths,
        binary: str = "/usr/sbin/libvirtd",
        log_filters: str = DEFAULT_LOG_FILTERS,
        user: tuple[int, int] | None = None,
        started: subprocess.Popen[bytes] | None = None,
    ) -> None:
        """``started``: the libvirtd `spawn_libvirtd` already started for ``paths``, taken
        over instead of starting another."""
        try:
            check_length(paths.socket)
        except SocketPathError as exc:
            raise LibvirtdError(f"{exc}; use a shorter private directory") from None
        self.paths = paths
        self._binary = binary
        self._log_filters = log_filters
        self._user = user
        self._process: _Child | None = None if started is None else _AdoptedChild(started)

    @property
    def uri(self) -> str:
        """The URI to connect to once :meth:`start` returned."""
        return self.paths.uri

    @property
    def pid(self) -> int | None:
        """libvirtd's pid while it runs."""
        return None if self._process is None else self._process.pid

    async def start(self, ready_within: float = 60.0) -> None:
        """Start libvirtd (unless it was started for us) and return once its socket
        accepts connections."""
        if self._process is None:
            await asyncio.to_thread(prepare_files, self.paths, self._log_filters, self._user)
            argv, options = libvirtd_command(self.paths, self._binary, self._user)
            try:
                self._process = await asyncio.create_subprocess_exec(*argv, **options)
            except OSError as exc:
                raise LibvirtdError(f"cannot start {self._binary}: {exc}") from None
        process = self._process
        deadline = time.monotonic() + ready_within
        while not await asyncio.to_thread(_socket_ready, self.paths.socket):
            if process.returncode is not None:
                raise LibvirtdError(await self._failure(f"exited with {process.returncode}"))
            if time.monotonic() > deadline:
                await self.stop()
                raise LibvirtdError(await self._failure(f"no socket after {ready_within:g}s"))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(process.wait(), 0.05)

    async def _failure(self, what: str) -> str:
        tail = await asyncio.to_thread(_log_tail, self.paths.log_file)
        return f"libvirtd {what}; last lines of {self.paths.log_file}:\n{tail}"

    async def wait(self) -> int:
        """Wait for libvirtd to exit and return its exit status."""
        if self._process is None:
            raise LibvirtdError("libvirtd was not started")
        return await self._process.wait()

    async def stop(self, term_grace: float = 10.0) -> None:
        """Terminate libvirtd and everything in its process group (virtlogd)."""
        process = self._process
        if process is None or process.returncode is not None:
            return
        self._signal_group(process.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), term_grace)
        except TimeoutError:
            self._signal_group(process.pid, signal.SIGKILL)
            await process.wait()
        # Anything left in libvirtd's group, then virtlogd: it daemonizes out of the
        # group and would otherwise outlive the launcher by its idle timeout.
        self._signal_group(process.pid, signal.SIGTERM)
        virtlogd = await asyncio.to_thread(_virtlogd_pid, self.paths)
        if virtlogd is not None:
            # Waited for: the launcher must not exit while it still runs (its pod would
            # end with a process of the guest's left behind).
            await end_process(virtlogd, term_grace)

    @staticmethod
    def _signal_group(pgid: int, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)
