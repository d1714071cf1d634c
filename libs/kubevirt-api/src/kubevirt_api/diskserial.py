"""The rule for a disk's `serial`: admission refuses what breaks it, and the converter
refuses it again, so a serial that would not survive the domain XML never reaches it."""

from __future__ import annotations

__all__ = ["MAX_SERIAL_LENGTH", "disk_serial_problem"]

MAX_SERIAL_LENGTH = 36


def disk_serial_problem(serial: str) -> str | None:
    """None for a valid serial; else the message naming what would be valid.

    Valid: 1 to 36 ASCII letters, digits, '-' or '_' (a control character such as '\\r'
    would not even round-trip through XML).
    """
    if (
        not serial
        or len(serial) > MAX_SERIAL_LENGTH
        or not all(c.isascii() and (c.isalnum() or c in "-_") for c in serial)
    ):
        return f"serial must be 1 to {MAX_SERIAL_LENGTH} ASCII letters, digits, '-' or '_'"
    return None
