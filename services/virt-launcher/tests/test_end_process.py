"""end_process: the launcher waits for a process it ends (virtlogd) to be gone."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

from virt_launcher.libvirtd import end_process


def _exited(pid: int) -> bool:
    """Gone, or a zombie (our own child, not reaped yet): no longer running."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rpartition(") ")[2].startswith("Z")


async def _spawn(*argv: str) -> subprocess.Popen[bytes]:
    return await asyncio.to_thread(subprocess.Popen, argv, stdout=subprocess.PIPE)


async def _reap(process: subprocess.Popen[bytes]) -> int:
    process.kill()  # a no-op on a zombie
    code = await asyncio.to_thread(process.wait)
    assert process.stdout is not None
    process.stdout.close()
    return code


async def test_a_process_that_ends_on_sigterm_has_exited_when_it_returns() -> None:
    process = await _spawn("sleep", "60")
    try:
        await end_process(process.pid, grace=30)
        assert await asyncio.to_thread(_exited, process.pid)
    finally:
        assert await _reap(process) == -15  # SIGTERM's doing, not the kill above


async def test_a_process_ignoring_sigterm_is_killed_after_the_grace() -> None:
    process = await _spawn("sh", "-c", "trap '' TERM; echo trapped; while :; do sleep 0.1; done")
    try:
        assert process.stdout is not None
        assert await asyncio.to_thread(process.stdout.readline) == b"trapped\n"
        await end_process(process.pid, grace=0.5)
        assert await asyncio.to_thread(_exited, process.pid)
    finally:
        await _reap(process)


async def test_a_pid_that_no_longer_exists_is_nothing_to_do() -> None:
    process = await _spawn("true")
    await _reap(process)
    await end_process(process.pid, grace=1)  # returns, raises nothing
