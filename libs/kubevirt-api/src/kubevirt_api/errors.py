"""Validation errors that name the field path and say what would be valid."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["FieldError", "InvalidObjectError", "describe"]


@dataclass(frozen=True, order=True)
class FieldError:
    """One problem: where (``spec.domain.devices.disks[0].name``) and what is wrong."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class InvalidObjectError(ValueError):
    """An object does not fit its schema; ``errors`` lists every problem found, in path order."""

    def __init__(self, errors: Iterable[FieldError]) -> None:
        self.errors: tuple[FieldError, ...] = tuple(sorted(errors))
        super().__init__("\n".join(str(e) for e in self.errors) or "invalid object")


def describe(value: object) -> str:
    """The JSON type name of ``value`` for messages (``object``, ``list``, ``string`` ...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list | tuple):
        return "list"
    return type(value).__name__
