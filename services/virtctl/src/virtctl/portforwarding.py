"""Local ends of a guest port: a TCP or UDP listener, or stdin/stdout (`--stdio`).

Every TCP connection (and every UDP peer) opens its own `portforward` stream, as
upstream's virtctl does; a UDP datagram is one binary message each way.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import threading
from collections.abc import Callable, Sequence

import aiohttp

from virtctl.commands.subresource import Cluster, SubresourceError
from virtctl.streams import relay_stream
from virtctl.targets import ForwardedPort, Target

__all__ = ["forward_connection", "forward_stdio", "serve_ports", "stream_kind"]

_CHUNK = 65536
# Upstream's virtctl dials port-forwards with this subprotocol.
_PROTOCOLS = ("plain.kubevirt.io",)


def stream_kind(port: ForwardedPort) -> str:
    """The subresource tail: `portforward/<remote>/<protocol>`."""
    return f"portforward/{port.remote}/{port.protocol}"


def _complain(label: str, error: object) -> None:
    print(f"virtctl: {label}: {error}", file=sys.stderr)


async def forward_connection(
    cluster: Cluster,
    resource: str,
    name: str,
    kind: str,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    label: str,
    protocols: tuple[str, ...] = _PROTOCOLS,
) -> None:
    """Relay one local TCP connection; returns (never raises) when either side ends it."""

    async def to_user(data: bytes) -> None:
        writer.write(data)
        await writer.drain()

    async def from_user() -> bytes:
        return await reader.read(_CHUNK)

    try:
        await relay_stream(
            cluster, name, kind, to_user, from_user, resource=resource, protocols=protocols
        )
    except SubresourceError as error:
        _complain(label, error)
    except ConnectionError:
        pass  # the local client hung up (a reset, not a clean close): serve on
    except aiohttp.ClientError as error:
        _complain(label, f"connection lost: {error}")
    finally:
        writer.close()


class _UdpPeers(asyncio.DatagramProtocol):
    """One stream per local peer address; datagrams to it are messages on that stream."""

    def __init__(self, cluster: Cluster, target: Target, port: ForwardedPort) -> None:
        self.cluster, self.target, self.port = cluster, target, port
        self.queues: dict[tuple[str, int], asyncio.Queue[bytes]] = {}
        self.tasks: set[asyncio.Task[None]] = set()
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.DatagramTransport)
        self.transport = transport

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        queue = self.queues.get(addr)
        if queue is None:
            queue = self.queues[addr] = asyncio.Queue()
            task = asyncio.ensure_future(self._peer(addr, queue))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
        queue.put_nowait(data)

    async def _peer(self, addr: tuple[str, int], queue: asyncio.Queue[bytes]) -> None:
        def to_user(data: bytes) -> None:
            if self.transport is not None:
                self.transport.sendto(data, addr)

        try:
            await relay_stream(
                self.cluster,
                self.target.name,
                stream_kind(self.port),
                to_user,
                queue.get,
                resource=self.target.resource,
                protocols=_PROTOCOLS,
            )
        except (SubresourceError, aiohttp.ClientError) as error:
            _complain(f"udp/{self.port.remote} of {self.target.kind}/{self.target.name}", error)
        finally:
            self.queues.pop(addr, None)


def _print(line: str) -> None:
    print(line, flush=True)


async def serve_ports(
    cluster: Cluster,
    target: Target,
    ports: Sequence[ForwardedPort],
    address: str,
    announce: Callable[[str], None] = _print,
) -> None:
    """Listen on every local port (announcing `Forwarding from ADDR:PORT -> REMOTE` for
    each once it listens), forward until cancelled."""
    servers: list[asyncio.Server] = []
    transports: list[asyncio.DatagramTransport] = []
    loop = asyncio.get_running_loop()
    try:
        for port in ports:
            label = f"{port.protocol}/{port.remote} of {target.kind}/{target.name}"
            if port.protocol == "udp":
                transport, _ = await loop.create_datagram_endpoint(
                    lambda port=port: _UdpPeers(cluster, target, port),  # type: ignore[misc]
                    local_addr=(address, port.local),
                )
                transports.append(transport)
                bound = transport.get_extra_info("sockname")
            else:

                async def connection(
                    reader: asyncio.StreamReader,
                    writer: asyncio.StreamWriter,
                    port: ForwardedPort = port,
                    label: str = label,
                ) -> None:
                    await forward_connection(
                        cluster,
                        target.resource,
                        target.name,
                        stream_kind(port),
                        reader,
                        writer,
                        label,
                    )

                server = await asyncio.start_server(connection, address, port.local)
                servers.append(server)
                bound = server.sockets[0].getsockname()
            announce(f"Forwarding from {bound[0]}:{bound[1]} -> {port.remote}")
        await asyncio.Event().wait()
    finally:
        for server in servers:
            server.close()
        for transport in transports:
            transport.close()


def _reader(fd: int, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[bytes]) -> None:
    """Blocking reads of `fd` in a daemon thread (a pipe from ssh; may never end)."""
    while True:
        try:
            data = os.read(fd, _CHUNK)
        except OSError:
            data = b""
        loop.call_soon_threadsafe(queue.put_nowait, data)
        if not data:
            return


async def forward_stdio(
    cluster: Cluster, target: Target, port: ForwardedPort, stdin: int = 0, stdout: int = 1
) -> None:
    """stdin to the guest's port, the guest's bytes to stdout (ssh's ProxyCommand); ends
    when either side does. Raises SubresourceError with the server's reason."""
    loop = asyncio.get_running_loop()
    incoming: asyncio.Queue[bytes] = asyncio.Queue()
    # A daemon thread, not the executor: asyncio.run would wait for a read that never ends.
    threading.Thread(target=_reader, args=(stdin, loop, incoming), daemon=True).start()

    async def to_user(data: bytes) -> None:
        await asyncio.to_thread(_write_all, stdout, data)

    await relay_stream(
        cluster,
        target.name,
        stream_kind(port),
        to_user,
        incoming.get,
        resource=target.resource,
        protocols=_PROTOCOLS,
    )


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        with contextlib.suppress(InterruptedError):
            view = view[os.write(fd, view) :]
