"""The base of every typed model and the field metadata the schemas are built from."""

from __future__ import annotations

import reprlib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, NamedTuple

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


@dataclass(frozen=True, kw_only=True, eq=False, repr=False)
class Model:
    """Base of every typed model (frozen dataclasses, keyword-only).

    ``extra`` holds what the typed fields do not: keys this library does not know and
    keys explicitly set to null. Dumping merges it back, so unknown fields survive a
    load/dump round-trip; typed values win over ``extra`` on a clash.

    Equality, hashing and repr are a dataclass's, but written once here rather than
    generated per class (``eq=False, repr=False`` on every model): building three
    methods fewer for each of the 356 generated classes takes a third off importing them,
    which every service and each VM's launcher pays at its start.
    """

    extra: Mapping[str, Any] = field(default_factory=dict, repr=False, hash=False)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        names = _names(self.__class__).compare
        return tuple(getattr(self, n) for n in names) == tuple(getattr(other, n) for n in names)

    def __hash__(self) -> int:
        return hash(tuple(getattr(self, n) for n in _names(self.__class__).hash))

    @reprlib.recursive_repr()
    def __repr__(self) -> str:
        shown = ", ".join(f"{n}={getattr(self, n)!r}" for n in _names(self.__class__).repr)
        return f"{self.__class__.__qualname__}({shown})"

    # The swagger.json definition this class was generated from ("" for hand-written ones).
    swagger_name: ClassVar[str] = ""
    # swagger.json marks some objects (mostly statuses) nullable.
    swagger_nullable: ClassVar[bool] = False
    # ``atomic`` when server-side apply must replace the object as a whole.
    swagger_map_type: ClassVar[str | None] = None


class _FieldNames(NamedTuple):
    compare: tuple[str, ...]
    hash: tuple[str, ...]
    repr: tuple[str, ...]


_FIELD_NAMES: dict[type, _FieldNames] = {}


def _names(cls: type) -> _FieldNames:
    """The fields a model class compares, hashes and shows, as a dataclass would pick them."""
    found = _FIELD_NAMES.get(cls)
    if found is None:
        every = fields(cls)
        found = _FieldNames(
            tuple(f.name for f in every if f.compare),
            tuple(f.name for f in every if (f.compare if f.hash is None else f.hash)),
            tuple(f.name for f in every if f.repr),
        )
        _FIELD_NAMES[cls] = found
    return found
