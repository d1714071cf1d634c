"""``python -m virt_launcher``'s first step: libvirtd, and its probe of QEMU, started
before the launcher's heavy imports.

In a pod the launcher's imports take about 0.4 s (the API models, the protocol, grpclib),
and libvirtd's start and its probe of QEMU (0.5 s under TCG, seconds on a busy node)
used to wait for them; the first define then waited for the probe. Started first, both
run in their own processes while the imports go on, so the first define finds the probe
done. Only the standard library, the launcher-pod contract and libvirt-python are loaded
here. The probe runs in a thread on a connection of its own, opened and closed before
the launcher's own connection (the one with the event loop) exists.

Nothing here is fatal: when the arguments are bad or libvirtd cannot start, the head
start steps aside and `virt_launcher.main` reports the problem as it always has.
"""

from __future__ import annotations

import contextlib
import io
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from subprocess import Popen

from virt_rpc.socketfiles import socket_stat

from virt_launcher.args import UsageError, parse_args
from virt_launcher.libvirtd_start import LibvirtdError, LibvirtdPaths, spawn_libvirtd

__all__ = ["HeadStart", "ProbeOutcome", "begin_head_start"]

# Long enough for a cold libvirtd on a busy node; the thread gives up quietly after it.
_SOCKET_WAIT_SECONDS = 60.0


@dataclass
class ProbeOutcome:
    """How the early probe went: its seconds, or why it did not run (set once, by the
    probe's thread; read after `HeadStart.probed` is set)."""

    seconds: float | None = None
    error: str | None = None


@dataclass
class HeadStart:
    """A libvirtd started before the event loop, and its probe of QEMU under way."""

    libvirtd: Popen[bytes]
    paths: LibvirtdPaths
    outcome: ProbeOutcome = field(default_factory=ProbeOutcome)
    probed: threading.Event = field(default_factory=threading.Event)


def begin_head_start(argv: Sequence[str]) -> HeadStart | None:
    """Start libvirtd for the launcher that ``argv`` describes, and a thread that has it
    probe QEMU once it serves; None when the launcher should start it itself."""
    try:
        # Quietly: main() parses the same argv and says what is wrong, once.
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            args = parse_args(argv)
    except (UsageError, SystemExit):  # SystemExit: argparse's own refusals, or --help
        return None
    paths = LibvirtdPaths(args.libvirt_dir)
    try:
        process = spawn_libvirtd(paths, args.libvirtd, user=args.libvirtd_user)
    except (LibvirtdError, OSError):
        return None  # run() tries again and reports the failure with libvirtd's log
    head_start = HeadStart(process, paths)
    threading.Thread(target=_probe, args=(head_start,), name="emulator-probe", daemon=True).start()
    return head_start


def _probe(head_start: HeadStart) -> None:
    started = time.monotonic()
    outcome = head_start.outcome
    try:
        import libvirt  # here, in the thread: 0.1 s the main thread's imports do not wait for

        # Polling the socket, not the process: reaping libvirtd is the supervisor's alone.
        while socket_stat(head_start.paths.socket) is None:
            if time.monotonic() - started > _SOCKET_WAIT_SECONDS:
                outcome.error = f"no libvirtd socket after {_SOCKET_WAIT_SECONDS:g}s"
                return
            time.sleep(0.005)
        connection = libvirt.open(head_start.paths.uri)
        try:
            connection.getDomainCapabilities(None, None, None, None, 0)
        finally:
            connection.close()
    except Exception as exc:  # only a head start: the first define reports real failures
        outcome.error = str(exc) or type(exc).__name__
    else:
        outcome.seconds = time.monotonic() - started
    finally:
        head_start.probed.set()
