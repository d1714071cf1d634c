"""Kubernetes int-or-string values (ports, percentages)."""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["IntOrString"]


@dataclass(frozen=True)
class IntOrString:
    """Either an integer or a string, as written (``8080`` or ``"http"`` or ``"25%"``)."""

    value: int | str

    @classmethod
    def parse(cls, raw: object) -> IntOrString:
        """Accept an int or a str; raise ValueError for anything else (bools included)."""
        if isinstance(raw, bool) or not isinstance(raw, int | str):
            raise ValueError(f"expected an integer or a string, got {type(raw).__name__}")
        return cls(raw)

    @property
    def is_int(self) -> bool:
        """Whether the value is an integer."""
        return isinstance(self.value, int)

    def scaled(self, total: int, *, round_up: bool = True) -> int:
        """Resolve an integer or a percentage string (``"25%"``) against ``total``."""
        if isinstance(self.value, int):
            return self.value
        if not self.value.endswith("%"):
            raise ValueError(f"invalid value {self.value!r}: expected an integer or a percentage")
        try:
            percent = int(self.value[:-1])
        except ValueError:
            raise ValueError(f"invalid percentage {self.value!r}") from None
        exact = total * percent / 100
        return math.ceil(exact) if round_up else math.floor(exact)

    def to_json(self) -> int | str:
        """The value to put back into a manifest."""
        return self.value

    def __str__(self) -> str:
        return str(self.value)
