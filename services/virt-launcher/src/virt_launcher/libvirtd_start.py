"""Starting a private libvirtd: its files (config, swtpm's configs) and its process.

Only the standard library and the launcher-pod contract are imported here, so that
``python -m virt_launcher`` can start libvirtd first and import the rest while libvirtd
comes up (`virt_launcher.headstart`); `virt_launcher.libvirtd` supervises what this
started.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from virt_domain.launcher_pod import LIBVIRT_SOCKET
from virt_rpc.socketfiles import SocketPathError, check_length, remove_stale_socket

__all__ = [
    "DEFAULT_LOG_FILTERS",
    "LibvirtdError",
    "LibvirtdPaths",
    "libvirtd_command",
    "libvirtd_environment",
    "prepare_files",
    "spawn_libvirtd",
]

DEFAULT_LOG_FILTERS = "3:remote 4:event 3:util.json 3:rpc 3:qemu.qemu_monitor 2:qemu 3:*"

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


def prepare_files(paths: LibvirtdPaths, log_filters: str, user: tuple[int, int] | None) -> None:
    """Write libvirtd's config and swtpm's under ``paths.root`` (owned by ``user``), and
    remove a socket a previous libvirtd left there."""
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


def _die_with_parent() -> None:
    # Runs in the child between fork and exec (after the uid switch, which would
    # reset it): libvirtd gets SIGTERM if the launcher dies without stopping it.
    _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def libvirtd_environment(paths: LibvirtdPaths) -> dict[str, str]:
    """libvirtd's environment: every session-mode directory under ``paths.root``."""
    root = paths.root
    return {
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


def libvirtd_command(
    paths: LibvirtdPaths, binary: str, user: tuple[int, int] | None
) -> tuple[list[str], dict[str, Any]]:
    """libvirtd's argv and the process options (for `subprocess.Popen` and asyncio's
    `create_subprocess_exec` alike): its own session and process group, no stdio, the
    parent-death signal, ``user``'s ids when given."""
    options: dict[str, Any] = {
        "env": libvirtd_environment(paths),
        "cwd": str(paths.root),
        "stdin": subprocess.DEVNULL,
        "stdout": subprocess.DEVNULL,
        "stderr": subprocess.DEVNULL,
        "start_new_session": True,
        "preexec_fn": _die_with_parent,
        "user": None if user is None else user[0],
        "group": None if user is None else user[1],
        "extra_groups": None if user is None else [],
    }
    return [binary, "-f", str(paths.config_file)], options


def spawn_libvirtd(
    paths: LibvirtdPaths,
    binary: str,
    log_filters: str = DEFAULT_LOG_FILTERS,
    user: tuple[int, int] | None = None,
) -> subprocess.Popen[bytes]:
    """Write libvirtd's files and start it, in a process group of its own; return at once.

    Call it from the thread that lives as long as libvirtd should (the main thread): the
    child gets SIGTERM when that thread ends. Raises LibvirtdError when it cannot start.
    """
    try:
        check_length(paths.socket)
    except SocketPathError as exc:
        raise LibvirtdError(f"{exc}; use a shorter private directory") from None
    prepare_files(paths, log_filters, user)
    argv, options = libvirtd_command(paths, binary, user)
    try:
        return subprocess.Popen(argv, **options)
    except OSError as exc:
        raise LibvirtdError(f"cannot start {binary}: {exc}") from None
