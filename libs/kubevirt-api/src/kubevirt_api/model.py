"""The base of every typed model and the field metadata the schemas are built from."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

__all__ = ["FieldInfo", "Model", "prop"]


@dataclass(frozen=True)
class FieldInfo:
    """How one dataclass field appears in JSON: its key, and extra checks beyond its type."""

    json: str
    minimum: int | None = None


def prop(json: str, *, minimum: int | None = None) -> dict[str, FieldInfo]:
    """Field metadata for a model attribute stored under the JSON key ``json``."""
    return {"kubevirt_api": FieldInfo(json=json, minimum=minimum)}


@dataclass(frozen=True, kw_only=True)
class Model:
    """Base of every typed model (frozen dataclasses, keyword-only).

    ``extra`` holds what the typed fields do not: keys this library does not know and
    keys explicitly set to null. Dumping merges it back, so unknown fields survive a
    load/dump round-trip; typed values win over ``extra`` on a clash.
    """

    extra: Mapping[str, Any] = field(default_factory=dict, repr=False)

    # The swagger.json definition this class was generated from ("" for hand-written ones).
    swagger_name: ClassVar[str] = ""
