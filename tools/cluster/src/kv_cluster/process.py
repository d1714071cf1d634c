"""Daemons that outlive the command that started them, tracked by PID and start time.

A record holds the PID and the kernel's start time of the process (field 22 of
/proc/<pid>/stat), so a recycled PID is never mistaken for ours and `stop` never signals a
process this tool did not start.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ProcessRecord", "spawn_daemon", "stop_process"]

# Runs in a throwaway interpreter: starts the daemon in its own session and exits, so the
# daemon is re-parented away from us (no zombie in our process, survives our exit). The
# spec comes on stdin so the environment never shows in `ps`.
_LAUNCHER = """
import json, os, subprocess, sys
spec = json.loads(sys.stdin.read())
log = open(spec["log"], "ab", buffering=0)
proc = subprocess.Popen(
    spec["argv"], stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
    cwd=spec["cwd"], env=spec["env"], start_new_session=True, close_fds=True,
)
print(proc.pid, flush=True)
"""


def _start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot, or None when it is gone or a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    fields = stat[stat.rindex(")") + 2 :].split()
    state, start = fields[0], fields[19]
    if state in ("Z", "X"):
        return None
    return int(start)


@dataclass(frozen=True)
class ProcessRecord:
    """A process this tool started: enough to recognise it later and nothing else."""

    name: str
    pid: int
    start_time: int
    argv: tuple[str, ...]

    def alive(self) -> bool:
        """True while this very process (same PID and start time) runs and is not a zombie."""
        return _start_time(self.pid) == self.start_time

    def save(self, path: Path) -> None:
        """Write the record atomically."""
        tmp = path.with_suffix(".tmp")
        tmp.write_text(
            json.dumps(
                {
                    "name": self.name,
                    "pid": self.pid,
                    "start_time": self.start_time,
                    "argv": list(self.argv),
                }
            )
            + "\n"
        )
        tmp.replace(path)

    @classmethod
    def from_pid(cls, name: str, pid: int, argv: tuple[str, ...]) -> ProcessRecord | None:
        """A record of a running process found by its PID (None when gone or a zombie)."""
        start = _start_time(pid)
        return None if start is None else cls(name, pid, start, argv)

    @classmethod
    def load(cls, path: Path) -> ProcessRecord | None:
        """Read a record; None when absent or unreadable (treated as "not running")."""
        try:
            raw = json.loads(path.read_text())
            return cls(
                name=str(raw["name"]),
                pid=int(raw["pid"]),
                start_time=int(raw["start_time"]),
                argv=tuple(str(a) for a in raw["argv"]),
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None


def spawn_daemon(
    name: str,
    argv: Sequence[str],
    *,
    log: Path,
    cwd: Path,
    env: Mapping[str, str] | None = None,
) -> ProcessRecord:
    """Start `argv` detached (own session, stdin from /dev/null, output appended to `log`)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    spec = {
        "argv": list(argv),
        "log": str(log),
        "cwd": str(cwd),
        "env": dict(os.environ if env is None else env),
    }
    out = subprocess.run(
        [sys.executable, "-c", _LAUNCHER],
        input=json.dumps(spec),
        check=True,
        capture_output=True,
        text=True,
    )
    pid = int(out.stdout.strip())
    start = _start_time(pid)
    if start is None:
        raise RuntimeError(f"{name} exited at once; see {log}")
    return ProcessRecord(name=name, pid=pid, start_time=start, argv=tuple(argv))


def stop_process(record: ProcessRecord, *, timeout: float = 20.0) -> bool:
    """SIGTERM the recorded process, SIGKILL it after `timeout`; True if it had been running."""
    if not record.alive():
        return False
    try:
        os.kill(record.pid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not record.alive():
            return True
        time.sleep(0.1)
    if record.alive():
        try:
            os.kill(record.pid, signal.SIGKILL)
        except ProcessLookupError:
            return True
        deadline = time.monotonic() + 5.0
        while record.alive() and time.monotonic() < deadline:
            time.sleep(0.05)
    return True
