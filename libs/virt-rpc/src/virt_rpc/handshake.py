"""The protocol version handshake: pick a version both peers speak, or refuse the peer.

Both the launcher (next to ``Cmd``) and the handler (next to ``Notify``) serve
:class:`HandshakeService`; the connecting side calls :func:`negotiate` before any
other call and stops talking to a peer that shares no version with it. A server may
ask to hear of each agreed handshake (``on_hello``): the handler's Notify server learns so
that a launcher has just become ready, without polling for its socket.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Final

import grpclib
from grpclib.client import Channel
from grpclib.const import Status

from virt_rpc.generated.kubevirtpy.launcher.handshake import (
    HandshakeBase,
    HandshakeStub,
    HelloRequest,
    HelloResponse,
)

__all__ = [
    "PROTOCOL_VERSION",
    "SUPPORTED_PROTOCOL_VERSIONS",
    "HandshakeService",
    "PeerInfo",
    "UnsupportedProtocolVersionError",
    "negotiate",
    "select_protocol_version",
]

# The N of the proto package kubevirtpy.launcher.vN this build speaks natively.
PROTOCOL_VERSION: Final = 1
# Every version this build can serve and call; a new version is added here first.
SUPPORTED_PROTOCOL_VERSIONS: Final[tuple[int, ...]] = (1,)

# A peer announcing more versions than this is broken or hostile.
_MAX_VERSIONS = 64
_MAX_TEXT = 256


@dataclass(frozen=True)
class PeerInfo:
    """What the other side told us, and the version both will use."""

    component: str
    build_version: str
    protocol_versions: tuple[int, ...]
    protocol_version: int


class UnsupportedProtocolVersionError(Exception):
    """The peer shares no protocol version with us (or does not speak the handshake)."""

    def __init__(self, peer: str, theirs: Sequence[int], ours: Sequence[int]) -> None:
        self.peer = peer
        self.theirs = tuple(theirs)
        self.ours = tuple(ours)
        super().__init__(
            f"peer {peer or '<unknown>'} speaks protocol versions {list(self.theirs)}, "
            f"this build supports {list(self.ours)}: no version in common"
        )


def select_protocol_version(ours: Iterable[int], theirs: Iterable[int]) -> int:
    """Return the highest version present in both, or 0 when there is none."""
    common = set(ours) & set(theirs)
    common.discard(0)
    return max(common, default=0)


class HandshakeService(HandshakeBase):
    """Serves ``Handshake.Hello`` for one component of this build."""

    def __init__(
        self,
        component: str,
        build_version: str,
        protocol_versions: Sequence[int] = SUPPORTED_PROTOCOL_VERSIONS,
        on_hello: Callable[[], None] | None = None,
    ) -> None:
        self._component = component
        self._build_version = build_version
        self._versions = tuple(protocol_versions)
        #: Called after answering a hello that agreed on a version (cheap, never raises).
        self._on_hello = on_hello

    async def hello(self, message: HelloRequest) -> HelloResponse:
        """Answer with our versions and the highest common one (0 if none)."""
        if len(message.protocol_versions) > _MAX_VERSIONS:
            raise grpclib.GRPCError(
                Status.INVALID_ARGUMENT,
                f"protocol_versions: at most {_MAX_VERSIONS} entries are allowed, "
                f"got {len(message.protocol_versions)}",
            )
        for field in ("component", "build_version"):
            if len(getattr(message, field)) > _MAX_TEXT:
                raise grpclib.GRPCError(
                    Status.INVALID_ARGUMENT, f"{field}: at most {_MAX_TEXT} characters"
                )
        selected = select_protocol_version(self._versions, message.protocol_versions)
        if selected and self._on_hello is not None:
            self._on_hello()
        return HelloResponse(
            component=self._component,
            build_version=self._build_version,
            protocol_versions=list(self._versions),
            selected_protocol_version=selected,
        )


def _is_unknown_method(exc: grpclib.GRPCError) -> bool:
    if exc.status is Status.UNIMPLEMENTED:
        return True
    # grpclib 0.4.9's server answers an unknown method without a content-type, which
    # its client reports as UNKNOWN before reading the UNIMPLEMENTED grpc-status.
    return exc.status is Status.UNKNOWN and exc.message == "Missing content-type header"


async def negotiate(
    channel: Channel,
    component: str,
    build_version: str,
    protocol_versions: Sequence[int] = SUPPORTED_PROTOCOL_VERSIONS,
    rpc_timeout: float = 5.0,
) -> PeerInfo:
    """Say hello over ``channel`` and return the agreed version.

    Raises UnsupportedProtocolVersionError when the peer shares no version with us or
    does not implement the handshake; other gRPC and connection errors propagate.
    """
    ours = tuple(protocol_versions)
    stub = HandshakeStub(channel, timeout=rpc_timeout)
    try:
        reply = await stub.hello(
            HelloRequest(
                component=component, build_version=build_version, protocol_versions=list(ours)
            )
        )
    except grpclib.GRPCError as exc:
        if _is_unknown_method(exc):
            raise UnsupportedProtocolVersionError("", (), ours) from exc
        raise
    theirs = tuple(reply.protocol_versions)
    # Decide ourselves rather than trust the peer's choice.
    selected = select_protocol_version(ours, theirs)
    if selected == 0:
        raise UnsupportedProtocolVersionError(reply.component, theirs, ours)
    return PeerInfo(
        component=reply.component,
        build_version=reply.build_version,
        protocol_versions=theirs,
        protocol_version=selected,
    )
