"""marshmallow 4 schemas for the typed models, built from the dataclass fields.

Every model class gets one schema (cached). Loading validates types, enums, quantities
and minimums and builds the frozen dataclass; dumping writes plain JSON values back,
omitting unset fields and merging ``extra`` so unknown fields survive.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime
import re
import types
import typing
from collections.abc import Mapping
from enum import StrEnum
from typing import Any, ClassVar, Final

from marshmallow import INCLUDE, Schema, ValidationError, fields, post_dump, post_load, pre_load

from kubevirt_api.errors import FieldError, describe
from kubevirt_api.intorstring import IntOrString
from kubevirt_api.model import FieldInfo, Model
from kubevirt_api.quantity import EXPECTED, Quantity, QuantityError
from kubevirt_api.sanitizers import sanitize_vmi_spec

__all__ = [
    "MapKey",
    "ModelSchema",
    "flatten_messages",
    "model_fields",
    "schema_for",
]

_EXTRA = "\x00extra"
# Map keys that read well as ``requests.memory``; others are shown as ``labels[kubevirt.io/os]``.
_PLAIN_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
_MESSAGES: Final = {"required": "required field is missing", "null": "must not be null"}


class MapKey(str):
    """A mapping key inside an error report (``path.key``, or ``path[key]`` if it has dots)."""

    __slots__ = ()


class _Str(fields.Field[str]):
    def __init__(
        self, *, min_length: int | None = None, max_length: int | None = None, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.min_length = min_length
        self.max_length = max_length

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> str:
        if not isinstance(value, str):
            raise ValidationError(f"expected a string, got {describe(value)}")
        if self.min_length is not None and len(value) < self.min_length:
            raise ValidationError(f"must be at least {self.min_length} characters long")
        if self.max_length is not None and len(value) > self.max_length:
            raise ValidationError(f"must be at most {self.max_length} characters long")
        return value


class _Timestamp(fields.Field[str]):
    """RFC 3339 text; YAML loaders turn unquoted timestamps into datetimes, accept those too."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> str:
        if isinstance(value, datetime.datetime):
            if value.tzinfo is None:
                value = value.replace(tzinfo=datetime.UTC)
            text: str = value.isoformat()
            return text.replace("+00:00", "Z")
        if not isinstance(value, str):
            raise ValidationError(f"expected an RFC 3339 timestamp string, got {describe(value)}")
        return value


class _Int(fields.Field[int]):
    def __init__(
        self, *, minimum: int | None = None, maximum: int | None = None, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.minimum = minimum
        self.maximum = maximum

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> int:
        if isinstance(value, float) and value.is_integer():
            value = int(value)  # JSON has one number type; 2.0 is the integer 2
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValidationError(f"expected an integer, got {describe(value)}")
        if self.minimum is not None and value < self.minimum:
            raise ValidationError(f"must be greater than or equal to {self.minimum}, got {value}")
        if self.maximum is not None and value > self.maximum:
            raise ValidationError(f"must be less than or equal to {self.maximum}, got {value}")
        return value


class _Number(fields.Field[float]):
    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValidationError(f"expected a number, got {describe(value)}")
        return value


class _Bool(fields.Field[bool]):
    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> bool:
        if not isinstance(value, bool):
            raise ValidationError(f"expected a boolean (true or false), got {describe(value)}")
        return value


class _Any(fields.Field[Any]):
    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("allow_none", True)  # free-form JSON may hold nulls
        super().__init__(**kwargs)

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> Any:
        return copy.deepcopy(value)

    def _serialize(self, value: Any, attr: str | None, obj: Any, **kwargs: Any) -> Any:
        return copy.deepcopy(value)


class _Quantity(fields.Field[Quantity]):
    def __init__(self, *, minimum: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.minimum = minimum

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> Quantity:
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise ValidationError(f"expected a quantity, got {describe(value)}; {EXPECTED}")
        try:
            quantity = Quantity.parse(value)
        except QuantityError as exc:
            raise ValidationError(str(exc)) from None
        if self.minimum is not None and quantity.value < self.minimum:
            raise ValidationError(f"must not be negative, got {value!r}")
        return quantity

    def _serialize(self, value: Any, attr: str | None, obj: Any, **kwargs: Any) -> Any:
        return None if value is None else value.to_json()


class _IntOrString(fields.Field[IntOrString]):
    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> IntOrString:
        try:
            return IntOrString.parse(value)
        except ValueError as exc:
            raise ValidationError(str(exc)) from None

    def _serialize(self, value: Any, attr: str | None, obj: Any, **kwargs: Any) -> Any:
        return None if value is None else value.to_json()


class _Enum(fields.Field[StrEnum]):
    def __init__(self, enum: type[StrEnum], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.enum = enum

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> StrEnum:
        valid = ", ".join(repr(member.value) for member in self.enum)
        if not isinstance(value, str):
            raise ValidationError(
                f"expected a string, got {describe(value)}; valid values: {valid}"
            )
        try:
            return self.enum(value)
        except ValueError:
            raise ValidationError(f"invalid value {value!r}; valid values: {valid}") from None

    def _serialize(self, value: Any, attr: str | None, obj: Any, **kwargs: Any) -> Any:
        return None if value is None else str(value.value)


class _List(fields.Field[tuple[Any, ...]]):
    def __init__(
        self, inner: fields.Field[Any], *, max_items: int | None = None, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.inner = inner
        self.max_items = max_items

    def _deserialize(
        self, value: Any, attr: str | None, data: Any, **kwargs: Any
    ) -> tuple[Any, ...]:
        if not isinstance(value, list | tuple):
            raise ValidationError(f"expected a list, got {describe(value)}")
        if self.max_items is not None and len(value) > self.max_items:
            raise ValidationError(f"must have at most {self.max_items} items, got {len(value)}")
        result: list[Any] = []
        errors: dict[int, Any] = {}
        for index, item in enumerate(value):
            if item is None:
                errors[index] = ["must not be null"]
                continue
            try:
                result.append(self.inner.deserialize(item))
            except ValidationError as exc:
                errors[index] = exc.messages
        if errors:
            raise ValidationError(errors)
        return tuple(result)

    def _serialize(self, value: Any, attr: str | None, obj: Any, **kwargs: Any) -> Any:
        if value is None:
            return None
        return [self.inner._serialize(item, None, None) for item in value]


class _Map(fields.Field[Mapping[str, Any]]):
    def __init__(self, inner: fields.Field[Any], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.inner = inner

    def _deserialize(
        self, value: Any, attr: str | None, data: Any, **kwargs: Any
    ) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise ValidationError(f"expected an object, got {describe(value)}")
        result: dict[str, Any] = {}
        errors: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                errors[MapKey(str(key))] = [f"keys must be strings, got {describe(key)}"]
                continue
            try:
                result[key] = self.inner.deserialize(item)
            except ValidationError as exc:
                errors[MapKey(key)] = exc.messages
        if errors:
            raise ValidationError(errors)
        return result

    def _serialize(self, value: Any, attr: str | None, obj: Any, **kwargs: Any) -> Any:
        if value is None:
            return None
        return {key: self.inner._serialize(item, None, None) for key, item in value.items()}


class _Nested(fields.Field[Model]):
    def __init__(self, model: type[Model], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.model = model

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> Model:
        result: Model = schema_for(self.model).load(value)
        return result

    def _serialize(self, value: Any, attr: str | None, obj: Any, **kwargs: Any) -> Any:
        return None if value is None else schema_for(self.model).dump(value)


class ModelSchema(Schema):
    """Base of the generated schemas: splits unknown keys into ``extra`` and back."""

    # Set after class creation so that no JSON field can shadow them.
    kv_model: ClassVar[type[Model]]
    kv_json_keys: ClassVar[frozenset[str]]
    kv_required_keys: ClassVar[frozenset[str]]

    class Meta:
        unknown = INCLUDE

    @pre_load
    def _split_extra(self, data: Any, **kwargs: Any) -> dict[str, Any]:
        if not isinstance(data, Mapping):
            raise ValidationError(f"expected an object, got {describe(data)}")
        if self.kv_model.swagger_name == "v1.VirtualMachineInstanceSpec":
            data = sanitize_vmi_spec(data)
        known: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for key, value in data.items():
            if not isinstance(key, str):
                raise ValidationError(f"keys must be strings, got {describe(key)} {key!r}")
            if key in self.kv_json_keys and (value is not None or key in self.kv_required_keys):
                known[key] = value
            else:
                # Unknown keys and explicit nulls are kept verbatim for the round-trip.
                extra[key] = copy.deepcopy(value)
        known[_EXTRA] = extra
        return known

    @post_load
    def _build(self, data: dict[str, Any], **kwargs: Any) -> Model:
        extra = data.pop(_EXTRA, {})
        return self.kv_model(extra=extra, **data)

    @post_dump(pass_original=True)
    def _merge_extra(self, data: dict[str, Any], original: Model, **kwargs: Any) -> dict[str, Any]:
        merged = copy.deepcopy(dict(original.extra))
        merged.update((key, value) for key, value in data.items() if value is not None)
        return merged


def _field_for(annotation: Any, info: FieldInfo | None, **kwargs: Any) -> fields.Field[Any]:
    minimum = info.minimum if info else None
    maximum = info.maximum if info else None
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(members) != 1:
            raise TypeError(f"unsupported union {annotation}")
        return _field_for(members[0], info, **kwargs)
    if origin is tuple:
        inner = _field_for(typing.get_args(annotation)[0], None, error_messages=_MESSAGES)
        return _List(inner, max_items=info.max_items if info else None, **kwargs)
    if origin is Mapping or origin is dict:
        values = _field_for(typing.get_args(annotation)[1], None, error_messages=_MESSAGES)
        return _Map(values, **kwargs)
    if annotation is Any:
        return _Any(**kwargs)
    if annotation is str:
        if info is not None and info.format == "date-time":
            return _Timestamp(**kwargs)
        if info is not None:
            return _Str(min_length=info.min_length, max_length=info.max_length, **kwargs)
        return _Str(**kwargs)
    if annotation is bool:
        return _Bool(**kwargs)
    if annotation is int:
        return _Int(minimum=minimum, maximum=maximum, **kwargs)
    if annotation is float:
        return _Number(**kwargs)
    if annotation is Quantity:
        return _Quantity(minimum=minimum, **kwargs)
    if annotation is IntOrString:
        return _IntOrString(**kwargs)
    if isinstance(annotation, type) and issubclass(annotation, StrEnum):
        return _Enum(annotation, **kwargs)
    if isinstance(annotation, type) and issubclass(annotation, Model):
        return _Nested(annotation, **kwargs)
    raise TypeError(f"no schema field for {annotation!r}")


def model_fields(model: type[Model]) -> list[tuple[dataclasses.Field[Any], FieldInfo, Any]]:
    """The JSON-visible fields of a model: (dataclass field, info, resolved annotation)."""
    hints = typing.get_type_hints(model)
    result = []
    for f in dataclasses.fields(model):
        info = f.metadata.get("kubevirt_api")
        if isinstance(info, FieldInfo):
            result.append((f, info, hints[f.name]))
    return result


_SCHEMAS: dict[type[Model], ModelSchema] = {}


def schema_for(model: type[Model]) -> ModelSchema:
    """The (cached) marshmallow schema instance of a model class."""
    cached = _SCHEMAS.get(model)
    if cached is not None:
        return cached
    declared: dict[str, Any] = {}
    json_keys: set[str] = set()
    required: set[str] = set()
    for f, info, annotation in model_fields(model):
        is_required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        declared[f.name] = _field_for(
            annotation,
            info,
            data_key=info.json,
            required=is_required,
            allow_none=not is_required,
            error_messages=_MESSAGES,
        )
        json_keys.add(info.json)
        if is_required:
            required.add(info.json)
    schema_cls = typing.cast(
        type[ModelSchema], type(f"{model.__name__}Schema", (ModelSchema,), declared)
    )
    schema_cls.kv_model = model
    schema_cls.kv_json_keys = frozenset(json_keys)
    schema_cls.kv_required_keys = frozenset(required)
    instance = _SCHEMAS[model] = schema_cls()
    return instance


def flatten_messages(messages: Any, path: str = "") -> list[FieldError]:
    """Turn marshmallow's nested error messages into a flat list of (path, message)."""
    if isinstance(messages, Mapping):
        found: list[FieldError] = []
        for key, value in messages.items():
            if key == "_schema":
                sub = path
            elif isinstance(key, int) or (isinstance(key, MapKey) and not _PLAIN_KEY.match(key)):
                sub = f"{path}[{key}]"
            else:
                sub = f"{path}.{key}" if path else str(key)
            found.extend(flatten_messages(value, sub))
        return found
    if isinstance(messages, list | tuple):
        return [e for m in messages for e in flatten_messages(m, path)]
    return [FieldError(path, str(messages))]
