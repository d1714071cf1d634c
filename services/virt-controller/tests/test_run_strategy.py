"""Run strategy and state change request decisions (upstream's semantics)."""

from __future__ import annotations

import datetime as dt

import pytest
from virt_controller.runstrategy import (
    Action,
    VmiView,
    decide,
    start_backoff_seconds,
)

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
LIVE = VmiView("u1", "Scheduled", False)
FAILED = VmiView("u1", "Failed", False)
SUCCEEDED = VmiView("u1", "Succeeded", False)


def act(strategy: str, vmi: VmiView | None, requests: list[dict[str, str]] | None = None) -> Action:
    return decide(strategy, vmi, requests or [], {}, NOW).action


@pytest.mark.parametrize(
    ("strategy", "vmi", "expected"),
    [
        ("Always", None, Action.CREATE),
        ("Always", LIVE, Action.NONE),
        ("Always", FAILED, Action.DELETE),
        ("Always", SUCCEEDED, Action.DELETE),
        ("RerunOnFailure", None, Action.CREATE),
        ("RerunOnFailure", FAILED, Action.DELETE),
        ("RerunOnFailure", SUCCEEDED, Action.NONE),
        ("Halted", LIVE, Action.DELETE),
        ("Halted", None, Action.NONE),
        ("Manual", None, Action.NONE),
        ("Manual", FAILED, Action.NONE),
        ("Once", None, Action.CREATE),
        ("Once", SUCCEEDED, Action.NONE),
    ],
)
def test_strategy_without_requests(strategy: str, vmi: VmiView | None, expected: Action) -> None:
    assert act(strategy, vmi) is expected


def test_start_request_creates_and_is_consumed() -> None:
    d = decide("Manual", None, [{"action": "Start"}], {}, NOW)
    assert (d.action, d.consumed) == (Action.CREATE, 1)


def test_start_request_on_finished_vmi_deletes_it_first() -> None:
    d = decide("Manual", FAILED, [{"action": "Start"}], {}, NOW)
    assert (d.action, d.consumed) == (Action.DELETE, 0)


def test_stop_request_deletes_the_named_vmi_and_is_kept_until_it_is_gone() -> None:
    d = decide("Manual", LIVE, [{"action": "Stop", "uid": "u1"}, {"action": "Start"}], {}, NOW)
    assert (d.action, d.consumed) == (Action.DELETE, 0)
    gone = decide("Manual", None, [{"action": "Stop", "uid": "u1"}, {"action": "Start"}], {}, NOW)
    assert (gone.action, gone.consumed) == (Action.NONE, 1)


def test_stop_request_for_another_vmi_is_dropped() -> None:
    d = decide("Manual", LIVE, [{"action": "Stop", "uid": "old"}], {}, NOW)
    assert (d.action, d.consumed) == (Action.NONE, 1)


def test_nothing_happens_while_the_vmi_is_being_deleted() -> None:
    assert act("Always", VmiView("u1", "Running", True), [{"action": "Start"}]) is Action.NONE


def test_backoff_delays_automatic_starts() -> None:
    later = (NOW + dt.timedelta(seconds=20)).strftime("%Y-%m-%dT%H:%M:%SZ")
    d = decide("Always", None, [], {"retryAfterTimestamp": later}, NOW)
    assert d.action is Action.WAIT_BACKOFF
    assert d.retry_after == pytest.approx(20)
    past = (NOW - dt.timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert decide("Always", None, [], {"retryAfterTimestamp": past}, NOW).action is Action.CREATE


def test_backoff_doubles_up_to_five_minutes() -> None:
    assert [start_backoff_seconds(n) for n in range(7)] == [0, 10, 20, 40, 80, 160, 300]
