"""Go durations as metav1.Duration carries them (freeze's unfreezeTimeout, kubectl flags)."""

from __future__ import annotations

import pytest
from kubevirt_api.durations import DurationError, parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("0", 0.0), ("5m", 300.0), ("1h0m0s", 3600.0), ("1.5s", 1.5), ("250ms", 0.25), ("-1s", -1)],
)
def test_go_durations_in_seconds(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "5", "soon", "5 m", "1m-1s"])
def test_anything_else_is_refused(text: str) -> None:
    with pytest.raises(DurationError, match="invalid duration"):
        parse_duration(text)
