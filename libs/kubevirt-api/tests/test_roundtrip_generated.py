"""Random objects built from the models' own fields survive load/dump unchanged."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from enum import StrEnum
from types import UnionType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kubevirt_api import KINDS, IntOrString, Model, Quantity, dump, load
from kubevirt_api.kinds import KindInfo
from kubevirt_api.model import FieldInfo
from kubevirt_api.schemas import model_fields

MAX_DEPTH = 4
TEXT = st.text(alphabet="abcxyz-./:0123456789 ", max_size=6)
QUANTITIES = st.sampled_from(["1Gi", "1024Mi", "100m", "0.5", "1e3", "64M", 2, 0, 1.5])
JSON_LEAF = st.none() | st.booleans() | st.integers(-5, 5) | TEXT


def _value(annotation: Any, info: FieldInfo | None, depth: int) -> st.SearchStrategy[Any]:
    if typing.get_origin(annotation) in (typing.Union, UnionType):
        (annotation,) = [a for a in typing.get_args(annotation) if a is not type(None)]
    origin = typing.get_origin(annotation)
    if origin is tuple:
        limit = min(2, info.max_items) if info and info.max_items is not None else 2
        return st.lists(_value(typing.get_args(annotation)[0], None, depth + 1), max_size=limit)
    if origin is Mapping:
        values = typing.get_args(annotation)[1]
        inner = JSON_LEAF if values is Any else _value(values, None, depth + 1)
        return st.dictionaries(TEXT, inner, max_size=2)
    if isinstance(annotation, type) and issubclass(annotation, StrEnum):
        return st.sampled_from([m.value for m in annotation])
    if isinstance(annotation, type) and issubclass(annotation, Model):
        return _object(annotation, depth + 1)
    if annotation is str:
        low = info.min_length if info and info.min_length else 0
        high = info.max_length if info and info.max_length is not None else 6
        return st.text(alphabet="abc/", min_size=low, max_size=max(low, min(high, 6)))
    if annotation is int:
        low = info.minimum if info and info.minimum is not None else -1000
        high = info.maximum if info and info.maximum is not None else 1000
        return st.integers(low, max(low, high))
    if annotation is float:
        return st.integers(-10, 10) | st.floats(-10, 10, allow_nan=False)
    if annotation is bool:
        return st.booleans()
    if annotation is Quantity:
        return QUANTITIES
    if annotation is IntOrString:
        return st.integers(0, 65535) | TEXT
    raise TypeError(annotation)


def _object(model: type[Model], depth: int) -> st.SearchStrategy[dict[str, Any]]:
    required: dict[str, st.SearchStrategy[Any]] = {}
    optional: dict[str, st.SearchStrategy[Any]] = {"zzFutureField": JSON_LEAF}
    for f, info, annotation in model_fields(model):
        is_required = f.default is dataclasses.MISSING
        nested = isinstance(annotation, type) or typing.get_origin(annotation) is not None
        if is_required:
            required[info.json] = _value(annotation, info, depth)
        elif depth < MAX_DEPTH or not nested:
            optional[info.json] = _value(annotation, info, depth)
    return st.fixed_dictionaries(required, optional=optional)


@pytest.mark.parametrize("kind", KINDS, ids=[k.kind for k in KINDS])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_objects_round_trip(kind: KindInfo, data: st.DataObject) -> None:
    doc = data.draw(_object(kind.model, 0))
    obj = load(kind.model, doc)
    assert dump(obj) == doc
    assert load(kind.model, dump(obj)) == obj
