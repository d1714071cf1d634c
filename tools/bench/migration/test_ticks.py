"""The downtime the migration benchmark reads from the guest's console ticks."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ticks import TickLog, switchover


def _fed(*lines: tuple[float, bytes]) -> TickLog:
    log = TickLog()
    for when, data in lines:
        log.feed(data, when)
    return log


def test_a_tick_split_across_reads_counts_once_when_whole() -> None:
    log = _fed((1.0, b"noise\r\nKUBEVIRT-PY-GUEST-TICK 7 1"), (1.5, b"2.34\r\nKUBEVIRT-PY-GUEST-T"))
    assert log.ticks == [(1.5, 7)]


def test_downtime_is_the_silence_from_the_sources_last_tick_to_the_targets_first() -> None:
    source = _fed(
        (9.0, b"KUBEVIRT-PY-GUEST-TICK 1 0.1\n"),  # before the migration started
        (10.0, b"KUBEVIRT-PY-GUEST-TICK 2 0.2\n"),
        (10.3, b"KUBEVIRT-PY-GUEST-TICK 3 0.3\n"),
        (10.4, b"KUBEVIRT-PY-GUEST-TICK 4 0.4\n"),
    )
    # The target resumes the guest where the source paused it: its first tick is the next.
    target = _fed(
        (10.9, b"KUBEVIRT-PY-GUEST-TICK 5 0.5\n"), (10.91, b"KUBEVIRT-PY-GUEST-TICK 6 0.6\n")
    )
    found = switchover(source, target, since=9.5)
    assert found is not None
    assert round(found.downtime, 3) == 0.5
    assert (found.last_source_tick, found.first_target_tick) == (4, 5)
    assert round(found.longest_source_gap, 3) == 0.3


def test_no_tick_on_either_side_is_no_figure() -> None:
    assert switchover(TickLog(), _fed((1.0, b"KUBEVIRT-PY-GUEST-TICK 1 0.1\n")), 0.0) is None
