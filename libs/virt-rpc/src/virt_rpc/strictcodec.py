"""Decoding requests from a peer we do not trust: a field of the wrong kind is refused.

betterproto2 decodes by field number and keeps whatever the wire held: a varint where a
message belongs arrives as an ``int`` (``request.vmi == 5``), and the service then fails
with an AttributeError, answered as UNKNOWN. Our servers decode with `StrictProtoCodec`
instead, which checks every field's Python type against the message's declaration and
answers a malformed request with INVALID_ARGUMENT before any service code runs.
"""

from __future__ import annotations

import datetime
from typing import Any

import betterproto2
from grpclib.const import Status
from grpclib.encoding.proto import ProtoCodec
from grpclib.exceptions import GRPCError

__all__ = ["MalformedMessageError", "StrictProtoCodec", "check_message"]

_SCALARS: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "bytes": (bytes,),
    "bool": (bool,),
    "float": (float,),
    "double": (float,),
    "enum": (int,),
    **{
        t: (int,)
        for t in (
            "int32",
            "int64",
            "uint32",
            "uint64",
            "sint32",
            "sint64",
            "fixed32",
            "fixed64",
            "sfixed32",
            "sfixed64",
        )
    },
}


class MalformedMessageError(ValueError):
    """A decoded message holds a value of the wrong kind for its declared field."""


def _check_value(value: Any, proto_type: str, unwrap: Any, where: str) -> None:
    if proto_type == "message":
        if unwrap is not None:
            # Well-known wrappers arrive unwrapped (Timestamp as a datetime).
            if isinstance(value, datetime.datetime | betterproto2.Message):
                return
            raise MalformedMessageError(f"{where}: not a timestamp")
        if not isinstance(value, betterproto2.Message):
            raise MalformedMessageError(f"{where}: not a message")
        check_message(value, where)
        return
    expected = _SCALARS.get(proto_type)
    if expected is not None and not isinstance(value, expected):
        raise MalformedMessageError(f"{where}: not a {proto_type}")


def check_message(message: betterproto2.Message, where: str = "") -> None:
    """Raise MalformedMessageError unless every field holds a value of its declared kind."""
    # `_betterproto` is a classproperty mypy cannot bind.
    metadata: Any = getattr(type(message), "_betterproto")  # noqa: B009
    for name, meta in metadata.meta_by_field_name.items():
        value = getattr(message, name, None)
        path = f"{where}.{name}" if where else name
        if value is None:
            if meta.optional or meta.proto_type == "message":
                continue  # unset
            raise MalformedMessageError(f"{path}: missing its value")
        if meta.map_meta is not None:
            if not isinstance(value, dict):
                raise MalformedMessageError(f"{path}: not a map")
            continue
        if meta.repeated:
            if not isinstance(value, list):
                raise MalformedMessageError(f"{path}: not a list")
            for index, item in enumerate(value):
                _check_value(item, meta.proto_type, meta.unwrap, f"{path}[{index}]")
            continue
        _check_value(value, meta.proto_type, meta.unwrap, path)


class StrictProtoCodec(ProtoCodec):
    """grpclib's codec, refusing undecodable or ill-typed requests as INVALID_ARGUMENT."""

    def decode(self, data: bytes, message_type: Any) -> Any:
        try:
            message = message_type.FromString(data)
            if isinstance(message, betterproto2.Message):
                check_message(message)
        except Exception as error:
            raise GRPCError(
                Status.INVALID_ARGUMENT,
                f"malformed {getattr(message_type, '__name__', 'message')}: {error}",
            ) from None
        return message
