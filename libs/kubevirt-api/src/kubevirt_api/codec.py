"""Load plain dicts (parsed YAML/JSON) into typed models and dump them back."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from marshmallow import ValidationError

from kubevirt_api.errors import FieldError, InvalidObjectError, describe
from kubevirt_api.kinds import KINDS, kind_for
from kubevirt_api.model import Model
from kubevirt_api.schemas import flatten_messages, schema_for

__all__ = ["dump", "load", "load_object", "validate_object"]

M = TypeVar("M", bound=Model)


def load(model: type[M], data: object, *, path: str = "") -> M:
    """Validate ``data`` against ``model``'s schema and build the typed object.

    Raises InvalidObjectError listing every problem with its field path (prefixed by
    ``path``, e.g. ``spec.template.spec``); never another exception for bad input.
    """
    try:
        result = schema_for(model).load(data)  # type: ignore[arg-type]
    except ValidationError as exc:
        raise InvalidObjectError(flatten_messages(exc.messages, path)) from None
    if not isinstance(result, model):
        raise TypeError(f"schema of {model.__name__} built {type(result).__name__}")
    return result


def dump(obj: Model) -> dict[str, Any]:
    """The plain JSON-compatible dict of a model: unset fields omitted, ``extra`` merged."""
    result: dict[str, Any] = schema_for(type(obj)).dump(obj)
    return result


def load_object(data: object) -> Model:
    """Load any object of our kinds, choosing the model from ``apiVersion`` and ``kind``."""
    if not isinstance(data, Mapping):
        raise InvalidObjectError([FieldError("", f"expected an object, got {describe(data)}")])
    api_version, kind = data.get("apiVersion"), data.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        problems = [
            FieldError(key, "required string field is missing")
            for key, value in (("apiVersion", api_version), ("kind", kind))
            if not isinstance(value, str)
        ]
        raise InvalidObjectError(problems)
    info = kind_for(api_version, kind)
    if info is None:
        served = [f"{k.group}/{v}" for k in KINDS if k.kind == kind for v in k.versions]
        if served:
            message = f"{kind} is not served as {api_version}; use apiVersion {' or '.join(served)}"
            raise InvalidObjectError([FieldError("apiVersion", message)])
        groups = ", ".join(sorted({k.group for k in KINDS}))
        message = f"unknown kind {api_version} {kind}; expected a kind of {groups}"
        raise InvalidObjectError([FieldError("kind", message)])
    return load(info.model, data)


def validate_object(data: object) -> list[FieldError]:
    """Every schema problem of ``data`` (an object of our kinds); empty when it is valid."""
    try:
        load_object(data)
    except InvalidObjectError as exc:
        return list(exc.errors)
    return []
