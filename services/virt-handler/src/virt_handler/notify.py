"""The Notify server of one launcher: its socket in that launcher's sockets dir.

Each VMI's launcher pushes its domain events to `sockets/domain-notify-pipe.sock` of its
own pod (the path the controller passes as `--notify-socket`). Serving one socket per
pod means a launcher can only ever speak for the VMI whose pod it runs in: an event
naming another VMI is refused. The launcher says hello (the version handshake) on this
socket as soon as its own socket is ready, so the handler connects at once, not at its
next poll.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import grpclib
from grpclib.const import Status
from grpclib.server import Server
from service_kit import get_logger
from virt_domain import launcher_pod
from virt_rpc import (
    DomainEvent,
    DomainEventType,
    HandshakeService,
    KubernetesEvent,
    KubernetesEventType,
    NotifyBase,
    NotifyResponse,
    VmiRef,
    serve_unix,
)

from .podfiles import NOTIFY_SOCKET, PodFiles, PodUid

__all__ = ["LAUNCHER_UID", "DomainSink", "NotifyServer", "NotifyService", "VmiIdentity"]

LAUNCHER_UID = launcher_pod.LAUNCHER_UID
_MAX_TEXT = 1024
_log = get_logger(__name__)


@dataclass(frozen=True)
class VmiIdentity:
    """The VMI a launcher pod serves."""

    namespace: str
    name: str
    uid: str

    def ref(self) -> VmiRef:
        """This VMI as the launcher's requests name it."""
        return VmiRef(namespace=self.namespace, name=self.name, uid=self.uid)

    def matches(self, ref: VmiRef | None) -> bool:
        return (
            ref is not None
            and ref.uid == self.uid
            and ref.namespace == self.namespace
            and ref.name == self.name
        )


@dataclass(frozen=True)
class DomainSink:
    """Where accepted messages go (the sync loop's callbacks)."""

    on_domain: Callable[[VmiIdentity, DomainEvent], None]
    on_event: Callable[[VmiIdentity, str, str, str], Awaitable[None]]
    #: The launcher agreed on a protocol version here: it is ready to be synced.
    on_hello: Callable[[VmiIdentity], None] | None = None


class NotifyService(NotifyBase):
    """Notify for one VMI: checks the sender's VMI and drops reordered events."""

    def __init__(self, vmi: VmiIdentity, sink: DomainSink) -> None:
        self.vmi = vmi
        self._sink = sink
        self.last_sequence = 0

    def _check(self, ref: VmiRef | None) -> None:
        if not self.vmi.matches(ref):
            got = f"{ref.namespace}/{ref.name} uid {ref.uid}" if ref else "none"
            raise grpclib.GRPCError(
                Status.FAILED_PRECONDITION,
                f"vmi: this socket serves {self.vmi.namespace}/{self.vmi.name} uid "
                f"{self.vmi.uid}, not {got}",
            )

    async def handle_domain_event(self, message: DomainEvent) -> NotifyResponse:
        self._check(message.vmi)
        if message.type is DomainEventType.UNSPECIFIED:
            raise grpclib.GRPCError(Status.INVALID_ARGUMENT, "type: ADDED, MODIFIED or DELETED")
        # A restarted launcher starts counting again at 1.
        if message.sequence and message.sequence <= self.last_sequence and message.sequence > 1:
            return NotifyResponse()
        self.last_sequence = message.sequence
        self._sink.on_domain(self.vmi, message)
        return NotifyResponse()

    async def handle_kubernetes_event(self, message: KubernetesEvent) -> NotifyResponse:
        self._check(message.vmi)
        if not message.reason or len(message.reason) > 128 or not message.reason.isalnum():
            raise grpclib.GRPCError(
                Status.INVALID_ARGUMENT, "reason: a CamelCase word of at most 128 characters"
            )
        kind = "Warning" if message.type is KubernetesEventType.WARNING else "Normal"
        await self._sink.on_event(self.vmi, kind, message.reason, message.message[:_MAX_TEXT])
        return NotifyResponse()


class NotifyServer:
    """One NotifyService served in one launcher pod's sockets dir."""

    def __init__(self, pod: PodUid, vmi: VmiIdentity, sink: DomainSink) -> None:
        self.pod = pod
        self.vmi = vmi
        self.service = NotifyService(vmi, sink)
        self._sink = sink
        self._server: Server | None = None
        self._dir_fd: int | None = None

    @property
    def serving(self) -> bool:
        return self._server is not None

    async def start(self, files: PodFiles, build_version: str) -> None:
        """Bind the socket (replacing a stale one), owned by the launcher's uid, mode 0600."""
        pinned = await asyncio.to_thread(files.sockets_dir, self.pod)
        try:
            path = pinned.child(NOTIFY_SOCKET)
            hello = self._sink.on_hello
            handshake = HandshakeService(
                "virt-handler",
                build_version,
                on_hello=None if hello is None else lambda: hello(self.vmi),
            )
            self._server = await serve_unix([self.service, handshake], path, mode=0o600)
            await asyncio.to_thread(
                os.chown,
                NOTIFY_SOCKET,
                LAUNCHER_UID,
                LAUNCHER_UID,
                dir_fd=pinned.fd,
                follow_symlinks=False,
            )
        except BaseException:
            pinned.close()
            raise
        self._dir_fd = pinned.fd
        _log.info("serving Notify", namespace=self.vmi.namespace, name=self.vmi.name)

    async def stop(self) -> None:
        """Close the server; the socket file goes with the pod's volume."""
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5)
            self._server = None
        if self._dir_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._dir_fd)
            self._dir_fd = None
