"""status.startFailure counts VMIs that failed before ever running."""

from __future__ import annotations

import datetime as dt
from typing import Any

from virt_controller.vm import next_start_failure

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def vmi(uid: str, phase: str, ran: bool = False) -> dict[str, Any]:
    stamps = [{"phase": "Scheduled"}] + ([{"phase": "Running"}] if ran else [])
    return {
        "metadata": {"uid": uid},
        "status": {"phase": phase, "phaseTransitionTimestamps": stamps},
    }


def test_first_failure_counts_one_and_waits_ten_seconds() -> None:
    got = next_start_failure({}, vmi("a", "Failed"), NOW)
    assert got == {
        "consecutiveFailCount": 1,
        "lastFailedVMIUID": "a",
        "retryAfterTimestamp": "2026-01-01T00:00:10Z",
    }


def test_same_vmi_is_counted_once() -> None:
    once = next_start_failure({}, vmi("a", "Failed"), NOW)
    assert once is not None
    assert next_start_failure(once, vmi("a", "Failed"), NOW) == once


def test_consecutive_failures_double_the_delay() -> None:
    first = next_start_failure({}, vmi("a", "Failed"), NOW)
    assert first is not None
    second = next_start_failure(first, vmi("b", "Failed"), NOW)
    assert second is not None
    assert second["consecutiveFailCount"] == 2
    assert second["retryAfterTimestamp"] == "2026-01-01T00:00:20Z"


def test_a_vmi_that_ran_clears_it() -> None:
    first = next_start_failure({}, vmi("a", "Failed"), NOW)
    assert first is not None
    assert next_start_failure(first, vmi("b", "Running", ran=True), NOW) is None
