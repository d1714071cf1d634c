"""The base of every typed model and the field metadata the schemas are built from."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

__all__ = ["FieldInfo", "Model", "prop"]


@dataclass(frozen=True)
class FieldInfo:
    """How one dataclass field appears in JSON and in the CRD schema.

    ``json`` is its key; ``minimum`` an extra check beyond its type; ``format``,
    ``nullable``, ``list_type`` and ``list_map_keys`` are carried from swagger.json into
    the generated CRDs (server-side apply merges lists by them).
    """

    json: str
    minimum: int | None = None
    format: str | None = None
    nullable: bool = False
    list_type: str | None = None
    list_map_keys: tuple[str, ...] = ()
    maximum: int | None = None
    max_items: int | None = None
    min_length: int | None = None
    max_length: int | None = None
    # Whether upstream's CRDs carry these bounds too (then ours do).
    crd_bounds: bool = False


def prop(json: str, **options: Any) -> dict[str, FieldInfo]:
    """Field metadata for a model attribute stored under the JSON key ``json``.

    ``options`` are the other :class:`FieldInfo` attributes.
    """
    return {"kubevirt_api": FieldInfo(json, **options)}


@dataclass(frozen=True, kw_only=True)
class Model:
    """Base of every typed model (frozen dataclasses, keyword-only).

    ``extra`` holds what the typed fields do not: keys this library does not know and
    keys explicitly set to null. Dumping merges it back, so unknown fields survive a
    load/dump round-trip; typed values win over ``extra`` on a clash.
    """

    extra: Mapping[str, Any] = field(default_factory=dict, repr=False, hash=False)

    # The swagger.json definition this class was generated from ("" for hand-written ones).
    swagger_name: ClassVar[str] = ""
    # swagger.json marks some objects (mostly statuses) nullable.
    swagger_nullable: ClassVar[bool] = False
    # ``atomic`` when server-side apply must replace the object as a whole.
    swagger_map_type: ClassVar[str | None] = None
