"""Conflicts between a VM and its instancetype: the field paths both set, as upstream."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Conflict", "ConflictError", "conflicts_message"]

_MESSAGE = "VM field(s) {} conflicts with selected instance type"


@dataclass(frozen=True, slots=True)
class Conflict:
    """One field the VM sets that the instancetype also provides (or a named problem)."""

    path: str
    #: Replaces upstream's standard sentence when set (e.g. a spread topology that does not divide).
    detail: str = ""

    @property
    def message(self) -> str:
        """What a denial says about this field."""
        return self.detail or _MESSAGE.format(self.path)


def conflicts_message(conflicts: Sequence[Conflict]) -> str:
    """Upstream's one-line summary: ``VM field(s) a, b conflicts with selected instance type``."""
    return _MESSAGE.format(", ".join(c.path for c in conflicts))


class ConflictError(ValueError):
    """Applying an instancetype failed because the VM already sets what it provides."""

    def __init__(self, conflicts: Sequence[Conflict]) -> None:
        self.conflicts = tuple(conflicts)
        only = self.conflicts[0] if len(self.conflicts) == 1 else None
        super().__init__(only.message if only is not None else conflicts_message(self.conflicts))
