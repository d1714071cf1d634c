"""The migration proxy: libvirt's and QEMU's streams between two launcher pods, over (m)TLS.

Upstream KubeVirt's `migration-proxy` (our code). Neither launcher opens a TCP port:

- **target** handler: one TCP listener per stream on the migration address (random
  port), each accepted connection spliced to a unix socket inside the target pod, opened
  afresh per connection (libvirt's socket, or the socket QEMU binds for the incoming
  memory/disk stream); `TargetProxy.ports` is what `targetDirectMigrationNodePorts`
  publishes: ``{"<tcp port>": 0 | 49152 | 49153}``.
- **source** handler: one unix listener per stream in the source pod's migration proxy
  dir (`virt_domain.launcher_pod.migration_proxy_socket` names), owned by the qemu user,
  each accepted connection spliced to the target's TCP port for that stream.

Every socket accepts any number of connections at once (multifd opens several per
stream). With TLS, the target requires a client certificate from the cluster's CA and
the source presents one (mutual TLS); `migrations.disableTLS` turns both off.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import ssl
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from service_kit import get_logger, pump_until_either_ends
from virt_domain.launcher_pod import LAUNCHER_UID, migration_proxy_socket
from virt_rpc import SocketPathError, remove_stale_socket

from .safepath import PathRefusedError, PinnedDir

__all__ = [
    "Connection",
    "MigrationProxies",
    "MigrationTLS",
    "MigrationTLSError",
    "Opener",
    "SourceProxy",
    "TargetProxy",
    "splice",
]

_log = get_logger(__name__)
_CHUNK = 256 * 1024
#: A TLS handshake that has not finished by then is dropped (a stuck peer holds nothing).
_HANDSHAKE_TIMEOUT = 30.0

Connection = tuple[asyncio.StreamReader, asyncio.StreamWriter]
#: Opens the far side of one accepted connection.
Opener = Callable[[], Awaitable[Connection]]


@dataclass(frozen=True)
class MigrationTLS:
    """The two contexts of migration mTLS; None for either: plain TCP."""

    server: ssl.SSLContext | None = None
    client: ssl.SSLContext | None = None


async def _copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(_CHUNK):
        writer.write(data)
        await writer.drain()


async def _close(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with contextlib.suppress(Exception):
        await writer.wait_closed()


async def splice(a: Connection, b: Connection) -> None:
    """Copy both ways until either direction ends (all it read is written), then close both."""
    try:
        await pump_until_either_ends(_copy(a[0], b[1]), _copy(b[0], a[1]))
    finally:
        await asyncio.gather(_close(a[1]), _close(b[1]))


#: What the target side sends on a connection once its far side (the target pod's socket)
#: is connected; the source side waits for it before it dials the next connection.
_CONNECTED = b"\x01"


class _Listener:
    """One listening socket: each accepted connection is spliced to what `opener` opens.

    Far sides are opened one at a time, in the order connections were accepted: QEMU 7.2
    takes the first connection of a migration stream as its main channel and the later ones
    as multifd channels, so the order in which the source's QEMU connected must reach the
    target's QEMU unchanged. With `ack`, the target side confirms each far side it opened
    (`_CONNECTED`), and the source's dialer waits for that before its next dial.
    """

    def __init__(self, opener: Opener, what: str, *, ack: bool = False) -> None:
        self._opener = opener
        self._what = what
        self._ack = ack
        self._opening = asyncio.Lock()
        self._relays: set[asyncio.Task[None]] = set()
        self.server: asyncio.Server | None = None

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:  # tracked, so stop() ends the connections too
            self._relays.add(task)
            task.add_done_callback(self._relays.discard)
        try:
            try:
                async with self._opening:
                    outbound = await self._opener()
                    if self._ack:
                        writer.write(_CONNECTED)
                        await writer.drain()
            except (
                OSError,
                SocketPathError,
                PathRefusedError,
                ssl.SSLError,
                TimeoutError,
            ) as error:
                _log.warning(
                    "migration proxy cannot open the far side", proxy=self._what, error=str(error)
                )
                await _close(writer)
                return
            await splice((reader, writer), outbound)
        except asyncio.CancelledError:
            # stop(): the end of this connection's task, not an error of it.
            writer.transport.abort()

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
        for task in list(self._relays):
            task.cancel()
        await asyncio.gather(*self._relays, return_exceptions=True)
        if self.server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.server.wait_closed(), 5)


class TargetProxy:
    """The target's TCP listeners for one migration: TCP port -> stream (see module doc)."""

    def __init__(self, listeners: list[tuple[int, int, _Listener]]) -> None:
        self._listeners = listeners

    @property
    def ports(self) -> dict[str, int]:
        """``targetDirectMigrationNodePorts``: each TCP port (as a string) and its stream."""
        return {str(tcp): stream for tcp, stream, _ in self._listeners}

    @classmethod
    async def start(
        cls, host: str, openers: Mapping[int, Opener], tls: ssl.SSLContext | None
    ) -> TargetProxy:
        """Listen on `host`, a random port per stream of `openers` (0: libvirt, 49152...)."""
        started: list[tuple[int, int, _Listener]] = []
        try:
            for stream, opener in openers.items():
                listener = _Listener(opener, f"target stream {stream}", ack=True)
                listener.server = await asyncio.start_server(
                    listener.handle,
                    host,
                    0,
                    ssl=tls,
                    ssl_handshake_timeout=_HANDSHAKE_TIMEOUT if tls else None,
                    limit=_CHUNK,
                )
                port = int(listener.server.sockets[0].getsockname()[1])
                started.append((port, stream, listener))
        except BaseException:
            for _, _, listener in started:
                await listener.stop()
            raise
        return cls(started)

    async def stop(self) -> None:
        """Close the listeners and every connection they carry."""
        for _, _, listener in self._listeners:
            await listener.stop()


def _bind_unix(directory: PinnedDir, name: str) -> str:
    """Remove a stale socket of that name (refusing anything else) and return its path."""
    remove_stale_socket(name, dir_fd=directory.fd)
    return directory.child(name)


class SourceProxy:
    """The source's unix listeners for one migration, in the source pod's proxy dir."""

    def __init__(
        self,
        directory: PinnedDir,
        listeners: list[tuple[str, _Listener]],
        address: str,
        ports: Mapping[str, int],
    ) -> None:
        self._directory = directory
        self._listeners = listeners
        self.address = address
        self.ports = dict(ports)

    @property
    def names(self) -> list[str]:
        """The socket names bound in the proxy dir."""
        return [name for name, _ in self._listeners]

    @classmethod
    async def start(
        cls,
        directory: PinnedDir,
        migration_uid: str,
        address: str,
        ports: Mapping[str, int],
        tls: ssl.SSLContext | None,
        owner: int | None = LAUNCHER_UID,
    ) -> SourceProxy:
        """Bind a socket per stream of `ports` ({"<tcp port>": stream}) in `directory`.

        Takes ownership of `directory` (closed by `stop`). Each accepted connection dials
        `address`:<tcp port>; the sockets belong to `owner` (QEMU's and libvirt's uid).
        """
        started: list[tuple[str, _Listener]] = []
        try:
            for tcp, stream in ports.items():
                name = migration_proxy_socket(migration_uid, stream)
                listener = _Listener(_dialer(address, int(tcp), tls), f"source stream {stream}")
                path = await asyncio.to_thread(_bind_unix, directory, name)
                listener.server = await asyncio.start_unix_server(
                    listener.handle, path, limit=_CHUNK
                )
                started.append((name, listener))
                if owner is not None:
                    await asyncio.to_thread(
                        os.chown, name, owner, owner, dir_fd=directory.fd, follow_symlinks=False
                    )
        except BaseException:
            await cls(directory, started, address, ports).stop()
            raise
        return cls(directory, started, address, ports)

    async def stop(self) -> None:
        """Close the listeners and their connections, remove the sockets."""
        for name, listener in self._listeners:
            await listener.stop()
            with contextlib.suppress(OSError, SocketPathError):
                await asyncio.to_thread(remove_stale_socket, name, dir_fd=self._directory.fd)
        self._directory.close()


def _dialer(host: str, port: int, tls: ssl.SSLContext | None) -> Opener:
    async def connect() -> Connection:
        reader, writer = await asyncio.open_connection(
            host,
            port,
            ssl=tls,
            ssl_handshake_timeout=_HANDSHAKE_TIMEOUT if tls else None,
            limit=_CHUNK,
        )
        try:
            # The target side has connected the target pod's socket (see _Listener).
            if await reader.readexactly(len(_CONNECTED)) != _CONNECTED:
                raise OSError("the target proxy sent something other than its go-ahead")
        except BaseException:
            await _close(writer)
            raise
        return reader, writer

    async def dial() -> Connection:
        try:
            return await asyncio.wait_for(connect(), _HANDSHAKE_TIMEOUT)
        except asyncio.IncompleteReadError as error:
            raise OSError("the target proxy closed before its far side opened") from error

    return dial


class MigrationTLSError(Exception):
    """No TLS material for migrations, and `migrations.disableTLS` does not allow plain TCP."""


class MigrationProxies:
    """Every proxy of this handler, by key; starting an existing one is a no-op.

    Plain TCP only when `tls_disabled()` says so: a handler without TLS material refuses
    to open a migration port (anyone reaching it would talk to a launcher's libvirtd).
    """

    def __init__(self, tls: MigrationTLS, tls_disabled: Callable[[], bool] = lambda: False):
        self._tls = tls
        self._tls_disabled = tls_disabled
        self.targets: dict[str, TargetProxy] = {}
        self.sources: dict[str, SourceProxy] = {}

    def _context(self, context: ssl.SSLContext | None) -> ssl.SSLContext | None:
        if self._tls_disabled():
            return None
        if context is None:
            raise MigrationTLSError(
                "this virt-handler has no TLS material for migrations (--tls-cert, --tls-key, "
                "--client-ca); set migrations.disableTLS in the KubeVirt CR to migrate without"
            )
        return context

    async def start_target(self, key: str, host: str, openers: Mapping[int, Opener]) -> TargetProxy:
        """The target proxy of `key`, started when it is not running yet."""
        found = self.targets.get(key)
        if found is not None:
            return found
        proxy = await TargetProxy.start(host, openers, self._context(self._tls.server))
        self.targets[key] = proxy
        _log.info("migration target proxy listening", vmi=key, host=host, ports=proxy.ports)
        return proxy

    async def stop_target(self, key: str) -> None:
        proxy = self.targets.pop(key, None)
        if proxy is not None:
            await proxy.stop()
            _log.info("migration target proxy stopped", vmi=key)

    async def start_source(
        self,
        key: str,
        directory: Callable[[], PinnedDir],
        migration_uid: str,
        address: str,
        ports: Mapping[str, int],
    ) -> SourceProxy:
        """The source proxy of `key` toward `address`/`ports`; restarted if they changed."""
        found = self.sources.get(key)
        if found is not None and (found.address, found.ports) == (address, dict(ports)):
            return found
        await self.stop_source(key)
        tls = self._context(self._tls.client)
        pinned = await asyncio.to_thread(directory)
        proxy = await SourceProxy.start(pinned, migration_uid, address, ports, tls)
        self.sources[key] = proxy
        _log.info("migration source proxy started", vmi=key, target=address, ports=proxy.ports)
        return proxy

    async def stop_source(self, key: str) -> None:
        proxy = self.sources.pop(key, None)
        if proxy is not None:
            await proxy.stop()
            _log.info("migration source proxy stopped", vmi=key)

    async def close(self) -> None:
        """Stop every proxy (the handler is going away)."""
        for key in list(self.targets):
            await self.stop_target(key)
        for key in list(self.sources):
            await self.stop_source(key)
