"""Runs a private, unprivileged libvirtd (session mode) for the launcher's one domain.

Everything libvirtd writes lives under one directory: its config, its socket, the
QEMU driver's state and cache, and its log. libvirtd runs with the launcher's own
(non-root) uid, or, when the launcher runs as root, as the unprivileged ``user``
given to it (libvirtd as root would need a ``libvirt-qemu`` account). It runs in a
process group of its own, so stopping it also ends the virtlogd it spawns.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import signal
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from virt_domain.launcher_pod import LIBVIRT_SOCKET
from virt_rpc import SocketPathError, check_length, remove_stale_socket, socket_stat

__all__ = ["Libvirtd", "LibvirtdError", "LibvirtdPaths", "end_process"]

_PR_SET_PDEATHSIG = 1
# Loaded here, not in the forked child, where only the prctl call itself may run.
_LIBC = ctypes.CDLL(None, use_errno=True)


class LibvirtdError(RuntimeError):
    """libvirtd could not be started (or died); the message carries its log's tail."""


@dataclass(frozen=True)
class LibvirtdPaths:
    """Where a private libvirtd keeps its files, all under ``root``."""

    root: Path

    @property
    def socket(self) -> Path:
        """libvirtd's read-write socket."""
        return self.root / LIBVIRT_SOCKET

    @property
    def config_file(self) -> Path:
        """The libvirtd.conf written for this instance."""
        return self.root / "libvirtd.conf"

    @property
    def log_file(self) -> Path:
        """libvirtd's own log."""
        return self.root / "libvirtd.log"

    @property
    def uri(self) -> str:
        """The URI that connects to this libvirtd's QEMU driver."""
        return f"qemu+unix:///session?socket={self.socket}"


def _config(paths: LibvirtdPaths, log_filters: str) -> str:
    # A host uuid of its own: libvirt refuses to migrate to a daemon with its own host
    # uuid ("migrate guest to the same host"), and two launcher pods may share a machine.
    return (
        "# Written by virt-launcher; one libvirtd per launcher, reachable only by its uid.\n"
        f'unix_sock_dir = "{paths.root}"\n'
        'unix_sock_rw_perms = "0700"\n'
        f'host_uuid = "{uuid.uuid4()}"\n'
        f'log_filters = "{log_filters}"\n'
        f'log_outputs = "3:file:{paths.log_file}"\n'
    )


def _swtpm_configs(paths: LibvirtdPaths) -> dict[Path, str]:
    """swtpm_setup's and swtpm_localca's configs, for a new TPM's manufacture.

    Debian's point the local CA at /var/lib/swtpm-localca, which the launcher's user cannot
    write; swtpm_setup run by a non-root user reads its config from the user's config home
    instead (`$XDG_CONFIG_HOME`, else `~/.config`; both get it, as whether libvirt passes
    the former on to swtpm_setup is not checked here).
    """
    localca = paths.root / "swtpm-localca"
    setup = (
        "# Written by virt-launcher: the local CA lives in the launcher's libvirt dir.\n"
        "create_certs_tool = /usr/bin/swtpm_localca\n"
        f"create_certs_tool_config = {paths.root / 'swtpm-localca.conf'}\n"
        "create_certs_tool_options = /etc/swtpm-localca.options\n"
        "active_pcr_banks = sha256\n"
    )
    ca = (
        f"statedir = {localca}\n"
        f"signingkey = {localca / 'signkey.pem'}\n"
        f"issuercert = {localca / 'issuercert.pem'}\n"
        f"certserial = {localca / 'certserial'}\n"
    )
    return {
        paths.root / "swtpm_setup.conf": setup,
        paths.root / ".config" / "swtpm_setup.conf": setup,
        paths.root / "swtpm-localca.conf": ca,
    }


def _prepare(paths: LibvirtdPaths, log_filters: str, user: tuple[int, int] | None) -> None:
    for sub in ("", "run", "cache", ".config", "swtpm-localca"):
        (paths.root / sub).mkdir(mode=0o700, parents=True, exist_ok=True)
        if user is not None:
            os.chown(paths.root / sub, *user)
    files = {paths.config_file: _config(paths, log_filters), **_swtpm_configs(paths)}
    for path, text in files.items():
        path.write_text(text)
        if user is not None:
            os.chown(path, *user)
    try:
        # A socket left by a previous libvirtd would be mistaken for a ready one.
        remove_stale_socket(paths.socket)
    except SocketPathError as exc:
        raise LibvirtdError(str(exc)) from None


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


def _die_with_parent() -> None:
    # Runs in the child between fork and exec (after the uid switch, which would
    # reset it): libvirtd gets SIGTERM if the launcher dies without stopping it.
    _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _log_tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


class Libvirtd:
    """A supervised libvirtd process with its files under ``paths.root``."""

    def __init__(
        self,
        paths: LibvirtdPaths,
        binary: str = "/usr/sbin/libvirtd",
        log_filters: str = "3:remote 4:event 3:util.json 3:rpc 3:qemu.qemu_monitor 2:qemu 3:*",
        user: tuple[int, int] | None = None,
    ) -> None:
        try:
            check_length(paths.socket)
        except SocketPathError as exc:
            raise LibvirtdError(f"{exc}; use a shorter private directory") from None
        self.paths = paths
        self._binary = binary
        self._log_filters = log_filters
        self._user = user
        self._process: asyncio.subprocess.Process | None = None

    @property
    def uri(self) -> str:
        """The URI to connect to once :meth:`start` returned."""
        return self.paths.uri

    @property
    def pid(self) -> int | None:
        """libvirtd's pid while it runs."""
        return None if self._process is None else self._process.pid

    async def start(self, ready_within: float = 60.0) -> None:
        """Start libvirtd and return once its socket accepts connections."""
        await asyncio.to_thread(_prepare, self.paths, self._log_filters, self._user)
        root = self.paths.root
        env = {
            "PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"),
            "HOME": str(root),
            # Session-mode libvirt puts its state, config and cache under these.
            "XDG_RUNTIME_DIR": str(root / "run"),
            # The config home holds QEMU's auto-generated channel sockets
            # (<root>/libvirt/qemu/channel/target/domain-N-<name>/...): keep it short,
            # a unix socket path fits in 107 bytes.
            "XDG_CONFIG_HOME": str(root),
            "XDG_CACHE_HOME": str(root / "cache"),
        }
        self._process = await asyncio.create_subprocess_exec(
            self._binary,
            "-f",
            str(self.paths.config_file),
            env=env,
            cwd=str(root),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=_die_with_parent,
            user=None if self._user is None else self._user[0],
            group=None if self._user is None else self._user[1],
            extra_groups=None if self._user is None else [],
        )
        deadline = time.monotonic() + ready_within
        while not await asyncio.to_thread(_socket_ready, self.paths.socket):
            if self._process.returncode is not None:
                raise LibvirtdError(await self._failure(f"exited with {self._process.returncode}"))
            if time.monotonic() > deadline:
                await self.stop()
                raise LibvirtdError(await self._failure(f"no socket after {ready_within:g}s"))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._process.wait(), 0.05)

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
