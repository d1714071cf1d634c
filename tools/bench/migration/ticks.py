"""The guest's console tick (kv_images GUEST_TICK_MARKER), stamped with this host's clock.

The guest prints `KUBEVIRT-PY-GUEST-TICK <n> <uptime>` every 10 ms (kernel argument
`kubevirt_py.tick`). Its own clock is no use for downtime: under TCG the guest's clock
stands still while QEMU is paused, so the guest never sees the pause. What counts is
when each tick *arrives* here: the longest silence across the switch-over, from the
source's last tick to the target's first, is the downtime as the guest's work shows it.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kv_images.guest import GUEST_TICK_MARKER

__all__ = ["Switchover", "TickLog", "follow_file", "follow_socket", "switchover"]

_TICK = re.compile(rf"{GUEST_TICK_MARKER} (\d+) [0-9.]+\r?\n")


@dataclass
class TickLog:
    """(host monotonic time of arrival, tick number) of every whole tick line seen."""

    ticks: list[tuple[float, int]] = field(default_factory=list)
    _partial: str = ""

    def feed(self, data: bytes, now: float) -> None:
        text = self._partial + data.decode(errors="replace")
        end = 0
        for match in _TICK.finditer(text):
            self.ticks.append((now, int(match.group(1))))
            end = match.end()
        rest = text[end:]
        # Keep only a line still being written (a tick is short).
        self._partial = rest[rest.rfind("\n") + 1 :][-200:]


def follow_file(path: Callable[[], Path | None], log: TickLog, stop: threading.Event) -> None:
    """Tail a serial log file (virtlogd's) every 2 ms until `stop`, from its current end
    (what it held before is history); `path` may not be known or exist yet."""
    handle = None
    try:
        while not stop.is_set():
            if handle is None:
                where = path()
                if where is not None:
                    try:
                        handle = where.open("rb")
                        handle.seek(0, 2)
                    except OSError:
                        handle = None
            if handle is not None:
                data = handle.read()
                if data:
                    log.feed(data, time.monotonic())
            stop.wait(0.002)
    finally:
        if handle is not None:
            handle.close()


async def follow_socket(path: Path, log: TickLog, within: float = 120.0) -> None:
    """Read a serial console socket (`mode='bind'`) until it closes; it may not exist yet."""
    deadline = time.monotonic() + within
    while True:
        try:
            reader, writer = await asyncio.open_unix_connection(str(path))
            break
        except (FileNotFoundError, ConnectionRefusedError):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.002)
    try:
        while chunk := await reader.read(65536):
            log.feed(chunk, time.monotonic())
    finally:
        writer.close()


@dataclass(frozen=True)
class Switchover:
    """The guest's silence as the target took over."""

    #: seconds from the source's last tick to the target's first
    downtime: float
    last_source_tick: int
    first_target_tick: int
    #: the longest silence on the source while the migration ran, before the switch-over
    longest_source_gap: float


def switchover(source: TickLog, target: TickLog, since: float) -> Switchover | None:
    """The switch-over seen in the two consoles, or None if either side printed no tick."""
    before = [t for t in source.ticks if t[0] >= since]
    if not before or not target.ticks:
        return None
    first_t, first_n = target.ticks[0]
    # Ticks the source printed up to the one before the target's first (the source may
    # still flush a line or two the target printed again: the guest's state is the source's).
    last = [t for t in before if t[1] < first_n] or before[:1]
    last_t, last_n = last[-1]
    gaps = [b[0] - a[0] for a, b in itertools.pairwise(last)]
    return Switchover(
        downtime=first_t - last_t,
        last_source_tick=last_n,
        first_target_tick=first_n,
        longest_source_gap=max(gaps, default=0.0),
    )
