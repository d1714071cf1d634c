"""Calls that carry undecoded bytes: what a hostile peer can send to our gRPC servers.

The handler's Notify server listens in a directory the launcher pod can write to, and
the launcher's Cmd server in one the handler reaches; either peer may be compromised.
`raw_unary` sends any bytes as the request of a unary method and returns the status and
the reply's bytes, so tests can feed each server malformed messages (`unary_methods`
lists what a servable offers, `malformed_requests` generates them, `judge` says whether
an answer is one a server may give).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from grpclib.client import Channel
from grpclib.const import Cardinality, Status
from grpclib.encoding.base import CodecBase
from grpclib.exceptions import GRPCError

if TYPE_CHECKING:
    from grpclib._typing import IServable
    from hypothesis.strategies import SearchStrategy

#: Statuses that mean a request reached code that did not expect it (or hung).
UNEXPECTED = frozenset({Status.UNKNOWN, Status.INTERNAL, Status.DEADLINE_EXCEEDED})

__all__ = [
    "UNEXPECTED",
    "RawCodec",
    "RawReply",
    "WireField",
    "judge",
    "malformed_requests",
    "raw_unary",
    "unary_methods",
    "wire",
]


class RawCodec(CodecBase):
    """The proto content type, with messages passed through as bytes."""

    __content_subtype__ = "proto"

    def encode(self, message: Any, message_type: Any) -> bytes:
        return bytes(message)

    def decode(self, data: bytes, message_type: Any) -> Any:
        return data


@dataclass(frozen=True)
class RawReply:
    """How one call ended: its status, message, and the reply's bytes when OK."""

    status: Status
    message: str = ""
    data: bytes = b""


def unary_methods(servable: IServable) -> dict[str, type[Any]]:
    """The unary-unary methods of `servable`: path -> request message type."""
    return {
        path: handler.request_type
        for path, handler in servable.__mapping__().items()
        if handler.cardinality is Cardinality.UNARY_UNARY
    }


async def raw_unary(
    channel: Channel, path: str, payload: bytes, deadline: float = 10.0
) -> RawReply:
    """Send `payload` as the request of the unary method `path` (channel: a RawCodec one)."""
    try:
        async with channel.request(
            path, Cardinality.UNARY_UNARY, bytes, bytes, timeout=deadline
        ) as stream:
            await stream.send_message(payload, end=True)
            data = await stream.recv_message()
            await stream.recv_trailing_metadata()
    except GRPCError as error:
        return RawReply(error.status, error.message or "")
    return RawReply(Status.OK, "", bytes(data or b""))


#: One protobuf field as sent: (field number, value); an int goes as a varint, bytes as
#: a length-delimited field (a string, a nested message or packed values).
WireField = tuple[int, int | bytes]


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative ints go as ten-byte two's complement, as protobuf's
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def wire(fields: Iterable[WireField]) -> bytes:
    """The protobuf encoding of `fields`, whatever the message type says they should be."""
    out = bytearray()
    for number, value in fields:
        if isinstance(value, int):
            out += _varint(number << 3) + _varint(value)
        else:
            out += _varint(number << 3 | 2) + _varint(len(value)) + value
    return bytes(out)


def malformed_requests(prefix: bytes = b"") -> SearchStrategy[bytes]:
    """Hypothesis strategy of request bytes: random protobuf fields of any number and kind
    (nested too), raw bytes, and, with `prefix` (e.g. the VMI reference the server
    checks first), requests that start with it so calls get past that check.
    Tests only: imports hypothesis (a development dependency) when called."""
    from hypothesis import strategies as st

    leaf = (
        st.integers(-(2**63), 2**64 - 1)
        | st.binary(max_size=40)
        | st.sampled_from([b"{}", b'{"spec":{"bad":1}}', b'{"metadata":[]}', b"\xff\xfe", b"["])
    )
    message = st.recursive(
        st.lists(st.tuples(st.integers(1, 12), leaf), max_size=6).map(wire),
        lambda inner: st.lists(st.tuples(st.integers(1, 12), inner | leaf), max_size=4).map(wire),
        max_leaves=12,
    )
    requests = message | st.binary(max_size=64)
    if prefix:
        requests = message.map(lambda rest: prefix + rest) | requests
    return requests


def judge(request_type: type[Any], payload: bytes, reply: RawReply) -> str | None:
    """Why `reply` is not an answer a server may give to `payload`; None when it may.

    A payload that does not decode may get any status but a hang; one that decodes must
    not reach code that fails unexpectedly (UNKNOWN, INTERNAL).
    """
    if reply.status is Status.DEADLINE_EXCEEDED:
        return "no answer before the deadline"
    if reply.status not in UNEXPECTED:
        return None
    try:
        request_type.FromString(payload)
    except Exception:
        return None
    return f"{reply.status.name}: {reply.message}"
