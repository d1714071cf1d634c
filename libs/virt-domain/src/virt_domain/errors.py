"""The one error the converter raises: a field path and what would be valid."""

from __future__ import annotations

__all__ = ["ConversionError"]


class ConversionError(ValueError):
    """The VMI cannot be turned into a domain.

    ``field`` is the path of the offending field in the VMI
    (``spec.domain.devices.disks[1].name``); ``message`` says what is wrong and what
    would be valid. ``str()`` gives both, ready for a user.
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
