"""Pushes the domain manager's changes and notices to virt-handler's ``Notify`` socket.

Delivery is in order and at least once: an item is retried (with backoff) until the
handler accepts it, and a change is never skipped. The handshake runs once per
connection; a handler sharing no protocol version with us is reported and retried.
Once the launcher's own socket is ready it greets the handler (that handshake, nothing
more), which is the handler's cue to connect and sync.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
from collections.abc import Callable
from pathlib import Path

from grpclib import GRPCError
from grpclib.client import Channel
from service_kit import get_logger
from virt_rpc import (
    PROTOCOL_VERSION,
    DomainEvent,
    DomainEventType,
    GuestInfo,
    KubernetesEvent,
    KubernetesEventType,
    NotifyStub,
    SocketPathError,
    UnsupportedProtocolVersionError,
    VmiRef,
    negotiate,
    open_channel,
)

from virt_launcher.cmd_server import to_domain
from virt_launcher.domain_manager import DomainManager, Notice, NoticeType
from virt_launcher.identity import VmiIdentity
from virt_launcher.states import ChangeKind, DomainChange

__all__ = ["NotifyPusher"]

_log = get_logger(__name__)

_KINDS = {
    ChangeKind.ADDED: DomainEventType.ADDED,
    ChangeKind.MODIFIED: DomainEventType.MODIFIED,
    ChangeKind.DELETED: DomainEventType.DELETED,
}


class NotifyPusher:
    """Sends every item of ``manager``'s subscription to the handler at ``socket``."""

    def __init__(
        self,
        socket: Path,
        identity: VmiIdentity,
        manager: DomainManager,
        build_version: str = "0.1.0",
        rpc_timeout: float = 5.0,
        max_backoff: float = 5.0,
        guest: Callable[[], GuestInfo] | None = None,
    ) -> None:
        self._socket = socket
        self._identity = identity
        self._queue = manager.subscribe()
        self._manager = manager
        self._build_version = build_version
        self._timeout = rpc_timeout
        self._max_backoff = max_backoff
        #: The guest agent's report at send time, carried in every domain event.
        self._guest = guest
        self._channel: Channel | None = None
        # greet() and the delivery loop may both open the connection: one of them does.
        self._connecting = asyncio.Lock()
        self._idle = asyncio.Event()
        self._idle.set()

    def _ref(self) -> VmiRef:
        i = self._identity
        return VmiRef(namespace=i.namespace, name=i.name, uid=i.uid)

    async def _stub(self) -> NotifyStub:
        async with self._connecting:
            if self._channel is None:
                channel = await open_channel(self._socket)
                try:
                    await negotiate(
                        channel, "virt-launcher", self._build_version, rpc_timeout=self._timeout
                    )
                except BaseException:
                    channel.close()
                    raise
                self._channel = channel
            return NotifyStub(self._channel, timeout=self._timeout)

    async def greet(self) -> None:
        """Say hello to the handler now (it syncs a launcher it hears from); not retried:
        the handler still finds the socket at its next look, and items are retried."""
        try:
            await self._stub()
        except (OSError, GRPCError, SocketPathError, TimeoutError) as exc:
            _log.info("handler not greeted", socket=str(self._socket), error=str(exc))
            self._drop_channel()
        except UnsupportedProtocolVersionError as exc:
            _log.error("notify refused", socket=str(self._socket), error=str(exc))

    def _drop_channel(self) -> None:
        if self._channel is not None:
            self._channel.close()
            self._channel = None

    async def _send(self, item: DomainChange | Notice) -> None:
        stub = await self._stub()
        if isinstance(item, DomainChange):
            await stub.handle_domain_event(
                DomainEvent(
                    vmi=self._ref(),
                    type=_KINDS[item.kind],
                    domain=to_domain(
                        item.status, guest=None if self._guest is None else self._guest()
                    ),
                    time=datetime.datetime.now(datetime.UTC),
                    sequence=item.sequence,
                )
            )
        else:
            kind = (
                KubernetesEventType.WARNING
                if item.type is NoticeType.WARNING
                else KubernetesEventType.NORMAL
            )
            await stub.handle_kubernetes_event(
                KubernetesEvent(
                    vmi=self._ref(), type=kind, reason=item.reason, message=item.message
                )
            )

    async def run(self) -> None:
        """Deliver forever (until cancelled)."""
        try:
            while True:
                if self._queue.empty():
                    self._idle.set()
                item = await self._queue.get()
                self._idle.clear()
                await self._deliver(item)
        finally:
            self._manager.unsubscribe(self._queue)
            self._drop_channel()

    async def _deliver(self, item: DomainChange | Notice) -> None:
        backoff = 0.05
        while True:
            try:
                await self._send(item)
                return
            except (OSError, GRPCError, SocketPathError, TimeoutError) as exc:
                _log.warning(
                    "notify failed; retrying",
                    socket=str(self._socket),
                    error=str(exc),
                    retry_in=round(backoff, 2),
                )
            except UnsupportedProtocolVersionError as exc:
                _log.error(
                    "notify refused",
                    socket=str(self._socket),
                    error=str(exc),
                    protocol=PROTOCOL_VERSION,
                )
            self._drop_channel()
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, self._max_backoff)

    async def drain(self, within: float) -> None:
        """Wait (up to ``within`` seconds) until everything queued so far was delivered."""
        if not self._queue.empty():
            self._idle.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._idle.wait(), within)
