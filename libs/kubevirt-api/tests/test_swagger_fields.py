"""Our schemas match swagger.json field by field, except the differences listed in one place."""

from __future__ import annotations

import json
import typing
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from types import UnionType
from typing import Any

import pytest
from kubevirt_api import Model, differences, models
from kubevirt_api.codegen import CRD_ENUM_FIELDS, ENUM_FIELDS, SPECIAL_REFS, closure
from kubevirt_api.intorstring import IntOrString
from kubevirt_api.kinds import KINDS
from kubevirt_api.model import FieldInfo
from kubevirt_api.quantity import Quantity
from kubevirt_api.schemas import model_fields

SWAGGER = json.loads(
    (
        Path(__file__).resolve().parents[3] / "compat/upstream-kubevirt/openapi/swagger.json"
    ).read_text()
)
DEFINITIONS: Mapping[str, Any] = SWAGGER["definitions"]
MODELS: dict[str, type[Model]] = {
    cls.swagger_name: cls
    for name in models.__all__
    if isinstance(cls := getattr(models, name), type) and issubclass(cls, Model)
}
_SPECIAL = {
    "k8s.io.apimachinery.pkg.api.resource.Quantity": "quantity",
    "k8s.io.apimachinery.pkg.util.intstr.IntOrString": "int-or-string",
    "k8s.io.apimachinery.pkg.apis.meta.v1.Time": "string(date-time)",
    "k8s.io.apimachinery.pkg.apis.meta.v1.Duration": "string",
    "k8s.io.apimachinery.pkg.apis.meta.v1.FieldsV1": "object",
    "k8s.io.apimachinery.pkg.runtime.RawExtension": "object",
}


def swagger_type(schema: Mapping[str, Any]) -> str:
    if "$ref" in schema:
        target = schema["$ref"].removeprefix("#/definitions/")
        return _SPECIAL.get(target, f"object:{target}")
    if "enum" in schema:
        return "enum:" + ",".join(sorted(schema["enum"]))
    kind = schema["type"]
    if isinstance(kind, list):
        return "|".join(sorted(kind))
    if kind == "array":
        return f"array<{swagger_type(schema['items'])}>"
    if kind == "object":
        values = schema.get("additionalProperties")
        return "object" if values is None else f"map<{swagger_type(values)}>"
    return str(kind)


def our_type(annotation: Any, info: FieldInfo | None) -> str:
    if typing.get_origin(annotation) in (typing.Union, UnionType):
        (annotation,) = [a for a in typing.get_args(annotation) if a is not type(None)]
    origin = typing.get_origin(annotation)
    minimum = f">={info.minimum}" if info and info.minimum is not None else ""
    if info and info.crd_bounds and annotation is int:
        minimum = " bounded"
    if origin is tuple:
        return f"array<{our_type(typing.get_args(annotation)[0], None)}>"
    if origin is Mapping:
        values = typing.get_args(annotation)[1]
        return "object" if values is Any else f"map<{our_type(values, None)}>"
    if isinstance(annotation, type) and issubclass(annotation, StrEnum):
        return "enum:" + ",".join(sorted(m.value for m in annotation))
    if isinstance(annotation, type) and issubclass(annotation, Model):
        return f"object:{annotation.swagger_name}"
    simple = {str: "string", int: "integer", float: "number", bool: "boolean"}
    if annotation in simple:
        return simple[annotation] + minimum
    return {Quantity: "quantity", IntOrString: "int-or-string"}[annotation] + minimum


def _allowed(definition: str, key: str, theirs: str, ours: str) -> str | None:
    """The listed reason for a difference, or None when it is not listed."""
    if f"{definition}.{key}" in differences.FIELD_DIFFERENCES:
        return f"{definition}.{key}"
    if ours.startswith("enum:") and theirs == "string":
        enumerated = (definition, key) in ENUM_FIELDS or (definition, key) in CRD_ENUM_FIELDS
        return "type:string->enum" if enumerated else None
    if theirs.startswith("array<") and ours.startswith("array<"):
        return _allowed(definition, key, theirs[6:-1], ours[6:-1])
    if theirs.startswith("map<") and ours.startswith("map<"):
        return _allowed(definition, key, theirs[4:-1], ours[4:-1])
    if (theirs, ours) in differences.TYPE_DIFFERENCES:
        return f"type:{theirs}->{ours}"
    return None


def test_every_definition_of_our_kinds_has_a_model() -> None:
    expected = set(closure(DEFINITIONS))
    assert expected <= set(MODELS)
    assert {kind.model.swagger_name for kind in KINDS} <= expected
    assert not expected & set(SPECIAL_REFS)


@pytest.mark.parametrize("definition", sorted(closure(DEFINITIONS)))
def test_property_names_match(definition: str) -> None:
    theirs = set(DEFINITIONS[definition].get("properties", {}))
    ours = {info.json for _, info, _ in model_fields(MODELS[definition])}
    assert ours == theirs
    required = {
        info.json for f, info, _ in model_fields(MODELS[definition]) if f.default is not None
    }
    assert required == set(DEFINITIONS[definition].get("required", ()))


def test_property_types_match_except_listed_differences() -> None:
    unlisted: list[str] = []
    used: set[str] = set()
    compared = 0
    for definition in closure(DEFINITIONS):
        properties = DEFINITIONS[definition].get("properties", {})
        for _, info, annotation in model_fields(MODELS[definition]):
            theirs, ours = swagger_type(properties[info.json]), our_type(annotation, info)
            compared += 1
            if theirs == ours:
                continue
            reason = _allowed(definition, info.json, theirs, ours)
            if reason is None:
                unlisted.append(f"{definition}.{info.json}: swagger {theirs}, ours {ours}")
            else:
                used.add(reason)
    assert not unlisted, "differences not listed in kubevirt_api.differences:\n" + "\n".join(
        unlisted
    )
    listed = {f"type:{a}->{b}" for a, b in differences.TYPE_DIFFERENCES} | set(
        differences.FIELD_DIFFERENCES
    )
    assert listed == used, f"stale entries in kubevirt_api.differences: {sorted(listed - used)}"
    assert compared > 1200
