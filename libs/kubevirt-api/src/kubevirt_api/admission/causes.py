"""Denial causes: a field path plus what would be valid, as upstream's metav1.StatusCause."""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["Cause", "CauseType", "FieldPath"]


class CauseType(enum.StrEnum):
    """The `type` of a metav1.StatusCause (the subset admission uses)."""

    INVALID = "FieldValueInvalid"
    REQUIRED = "FieldValueRequired"
    NOT_FOUND = "FieldValueNotFound"
    NOT_SUPPORTED = "FieldValueNotSupported"
    DUPLICATE = "FieldValueDuplicate"
    FORBIDDEN = "FieldValueForbidden"


@dataclass(frozen=True, slots=True)
class FieldPath:
    """A JSON field path rendered the Kubernetes way: `spec.domain.devices.disks[1].name`."""

    text: str = ""

    def child(self, *names: str) -> FieldPath:
        """The path of a nested field (several names descend several levels)."""
        text = self.text
        for name in names:
            text = f"{text}.{name}" if text else name
        return FieldPath(text)

    def index(self, i: int) -> FieldPath:
        """The path of the i-th item of a list."""
        return FieldPath(f"{self.text}[{i}]")

    def key(self, k: str) -> FieldPath:
        """The path of a map entry."""
        return FieldPath(f"{self.text}[{k}]")

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True, slots=True)
class Cause:
    """One problem: the field it concerns and a message saying what would be valid."""

    field: str
    message: str
    type: CauseType = CauseType.INVALID

    def as_status_cause(self) -> dict[str, str]:
        """The metav1.StatusCause shape sent in an AdmissionResponse."""
        return {"type": self.type.value, "field": self.field, "message": self.message}

    def __str__(self) -> str:
        return f"{self.field}: {self.message}" if self.field else self.message
