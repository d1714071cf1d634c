"""Go durations (`time.ParseDuration`, metav1.Duration's JSON): `5m`, `1h0m0s`, `250ms`."""

from __future__ import annotations

import re

__all__ = ["DurationError", "parse_duration"]

_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_SECONDS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}


class DurationError(ValueError):
    """The text is no Go duration; the message says what one looks like."""


def parse_duration(text: str) -> float:
    """Seconds of a Go duration (a sign allowed, "0" alone needs no unit)."""
    sign, body = (-1.0, text[1:]) if text.startswith("-") else (1.0, text.removeprefix("+"))
    if body == "0":
        return 0.0
    parts = _PART.findall(body)
    if not parts or "".join(number + unit for number, unit in parts) != body:
        raise DurationError(f"invalid duration {text!r} (e.g. 30s, 5m, 1h30m)")
    return sign * sum(float(number) * _SECONDS[unit] for number, unit in parts)
