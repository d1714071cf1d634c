"""The migration proxy splices real sockets: source unix socket -> mutual TLS -> target unix socket."""

from __future__ import annotations

import asyncio
import os
import ssl
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from service_kit import TLSFiles, client_context, server_context
from virt_handler.migration_proxy import (
    Connection,
    MigrationProxies,
    MigrationTLS,
    MigrationTLSError,
    Opener,
)
from virt_handler.safepath import open_dir

if TYPE_CHECKING:
    from conftest import Authority

MIGRATION_UID = "5f0e7a8c-1d2b-4c3d-9e8f-0a1b2c3d4e5f"


@dataclass
class Backend:
    """A unix server standing in for the target's libvirt or QEMU: echoes, tagged."""

    path: Path
    tag: bytes
    connections: int = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        writer.write(self.tag)  # says which socket answers, then echoes
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        writer.close()

    def opener(self) -> Opener:
        async def open_() -> Connection:
            return await asyncio.open_unix_connection(str(self.path))

        return open_


@pytest.fixture
async def backends(tmp_path: Path) -> AsyncIterator[dict[int, Backend]]:
    made = {port: Backend(tmp_path / f"b{port}", f"<{port}>".encode()) for port in (0, 49152)}
    servers = [await asyncio.start_unix_server(b.handle, str(b.path)) for b in made.values()]
    yield made
    for server in servers:
        server.close()
        await server.wait_closed()


def _tls(authority: Callable[[str], Authority]) -> tuple[MigrationTLS, Authority]:
    ca = authority("cluster-ca")
    cert, key = ca.issue("virt-handler", server=True)
    client_cert, client_key = ca.issue("virt-handler-client")
    return (
        MigrationTLS(
            server=server_context(TLSFiles(cert, key, ca.ca), require_client_cert=True),
            client=client_context(TLSFiles(client_cert, client_key, ca.ca), check_hostname=False),
        ),
        ca,
    )


async def _exchange(path: str, payload: bytes, tag: bytes) -> bytes:
    """Send `payload`, read the tagged echo, close (a proxy ends both ways at the first EOF)."""
    # Through the directory's descriptor: the tmp path can exceed a socket address.
    directory, name = os.path.split(path)
    fd = os.open(directory, os.O_PATH | os.O_DIRECTORY)
    try:
        reader, writer = await asyncio.open_unix_connection(f"/proc/self/fd/{fd}/{name}")
    finally:
        os.close(fd)
    writer.write(payload)
    await writer.drain()
    assert await reader.readexactly(len(tag)) == tag
    data = await reader.readexactly(len(payload))
    writer.close()
    return data


async def test_each_stream_reaches_its_socket_over_mutual_tls_with_many_connections(
    tmp_path: Path, backends: dict[int, Backend], authority: Callable[[str], Authority]
) -> None:
    tls, _ = _tls(authority)
    proxies = MigrationProxies(tls)
    target = await proxies.start_target(
        "vmi", "127.0.0.1", {port: b.opener() for port, b in backends.items()}
    )
    assert sorted(target.ports.values()) == [0, 49152]
    (tmp_path / "proxy").mkdir()
    source = await proxies.start_source(
        "vmi", lambda: open_dir(tmp_path, "proxy"), MIGRATION_UID, "127.0.0.1", target.ports
    )
    assert sorted(source.names) == [
        f"{MIGRATION_UID}-49152-source.sock",
        f"{MIGRATION_UID}-source.sock",
    ]
    memory = str(tmp_path / "proxy" / f"{MIGRATION_UID}-49152-source.sock")
    libvirt = str(tmp_path / "proxy" / f"{MIGRATION_UID}-source.sock")
    # QEMU and libvirt (uid 107) connect to these sockets.
    assert os.stat(memory).st_uid == 107

    big = os.urandom(1024 * 1024)
    replies = await asyncio.gather(
        *(_exchange(memory, big, b"<49152>") for _ in range(8)),
        _exchange(libvirt, b"hello libvirt", b"<0>"),
    )
    assert replies == [big] * 8 + [b"hello libvirt"]
    assert backends[49152].connections == 8
    assert backends[0].connections == 1
    await proxies.close()
    assert not (tmp_path / "proxy" / f"{MIGRATION_UID}-source.sock").exists()


async def _talk_tls(port: int, context: ssl.SSLContext) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context)
    writer.write(b"x")
    await writer.drain()
    # TLS 1.3: the refusal of our certificate arrives with the first read.
    if not await reader.read(1):
        raise ConnectionError("closed without a word")


async def test_the_target_refuses_a_peer_without_the_clusters_client_certificate(
    backends: dict[int, Backend], authority: Callable[[str], Authority]
) -> None:
    tls, ca = _tls(authority)
    proxies = MigrationProxies(tls)
    target = await proxies.start_target("vmi", "127.0.0.1", {0: backends[0].opener()})
    port = next(iter(target.ports))
    stranger = authority("stranger-ca")
    cert, key = stranger.issue("intruder")
    for files in (TLSFiles(None, None, ca.ca), TLSFiles(cert, key, ca.ca)):
        with pytest.raises((ssl.SSLError, ConnectionError)):
            await _talk_tls(int(port), client_context(files, check_hostname=False))
    assert backends[0].connections == 0
    await proxies.close()


#: The target proxy's go-ahead once it has connected the target pod's socket.
GO_AHEAD = b"\x01"


async def test_connections_reach_the_target_in_the_order_the_source_accepted_them(
    tmp_path: Path,
) -> None:
    """QEMU 7.2 takes a stream's first connection as its main channel: order must hold."""
    arrived: list[bytes] = []
    done = asyncio.Event()

    async def far_side(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        arrived.append(await reader.readexactly(2))
        if len(arrived) == 9:
            done.set()
        await reader.read()

    qemu = await asyncio.start_server(far_side, "127.0.0.1", 0)
    qemu_port = qemu.sockets[0].getsockname()[1]

    opened = 0

    async def opener() -> Connection:
        # A slow far side for the first connection: a racing later one would overtake it.
        nonlocal opened
        opened += 1
        if opened == 1:
            await asyncio.sleep(0.2)
        return await asyncio.open_connection("127.0.0.1", qemu_port)

    proxies = MigrationProxies(MigrationTLS(), tls_disabled=lambda: True)
    target = await proxies.start_target("vmi", "127.0.0.1", {49152: opener})
    (tmp_path / "proxy").mkdir()
    await proxies.start_source(
        "vmi", lambda: open_dir(tmp_path, "proxy"), MIGRATION_UID, "127.0.0.1", target.ports
    )
    # Through the directory's descriptor: the tmp path can exceed a socket address.
    fd = os.open(tmp_path / "proxy", os.O_PATH | os.O_DIRECTORY)
    writers = []
    try:
        for i in range(9):
            _, writer = await asyncio.open_unix_connection(
                f"/proc/self/fd/{fd}/{MIGRATION_UID}-49152-source.sock"
            )
            writer.write(b"%02d" % i)
            writers.append(writer)
    finally:
        os.close(fd)
    await asyncio.wait_for(done.wait(), 10)
    assert arrived == [b"%02d" % i for i in range(9)]
    for writer in writers:
        writer.close()
    await proxies.close()
    qemu.close()


async def test_disable_tls_makes_both_sides_plain(
    tmp_path: Path, backends: dict[int, Backend], authority: Callable[[str], Authority]
) -> None:
    tls, _ = _tls(authority)
    proxies = MigrationProxies(tls, tls_disabled=lambda: True)
    target = await proxies.start_target("vmi", "127.0.0.1", {0: backends[0].opener()})
    port = next(iter(target.ports))
    reader, writer = await asyncio.open_connection("127.0.0.1", int(port))
    assert await reader.readexactly(1) == GO_AHEAD
    writer.write(b"plain")
    assert await reader.readexactly(8) == b"<0>plain"
    writer.close()
    (tmp_path / "proxy").mkdir()
    await proxies.start_source(
        "vmi", lambda: open_dir(tmp_path, "proxy"), MIGRATION_UID, "127.0.0.1", target.ports
    )
    reply = await _exchange(
        str(tmp_path / "proxy" / f"{MIGRATION_UID}-source.sock"), b"again", b"<0>"
    )
    assert reply == b"again"
    await proxies.close()


async def test_stopping_the_target_ends_connections_in_flight(
    backends: dict[int, Backend], authority: Callable[[str], Authority]
) -> None:
    proxies = MigrationProxies(MigrationTLS(), tls_disabled=lambda: True)
    target = await proxies.start_target("vmi", "127.0.0.1", {0: backends[0].opener()})
    reader, writer = await asyncio.open_connection("127.0.0.1", int(next(iter(target.ports))))
    assert await reader.readexactly(1) == GO_AHEAD
    writer.write(b"ping")
    assert await reader.readexactly(7) == b"<0>ping"
    await proxies.stop_target("vmi")
    assert await reader.read() == b""
    writer.close()
    assert proxies.targets == {}


async def test_a_stream_whose_socket_is_missing_closes_that_connection_only(
    tmp_path: Path, backends: dict[int, Backend]
) -> None:
    async def missing() -> Connection:
        return await asyncio.open_unix_connection(str(tmp_path / "nothing-here"))

    proxies = MigrationProxies(MigrationTLS(), tls_disabled=lambda: True)
    target = await proxies.start_target(
        "vmi", "127.0.0.1", {0: backends[0].opener(), 49152: missing}
    )
    by_stream = {stream: int(tcp) for tcp, stream in target.ports.items()}
    reader, writer = await asyncio.open_connection("127.0.0.1", by_stream[49152])
    assert await reader.read() == b""
    writer.close()
    reader, writer = await asyncio.open_connection("127.0.0.1", by_stream[0])
    assert await reader.readexactly(1) == GO_AHEAD
    writer.write(b"still")
    assert await reader.readexactly(8) == b"<0>still"
    writer.close()
    await proxies.close()


async def test_without_tls_material_no_port_opens_unless_tls_is_disabled(
    backends: dict[int, Backend],
) -> None:
    proxies = MigrationProxies(MigrationTLS())
    with pytest.raises(MigrationTLSError, match="disableTLS"):
        await proxies.start_target("vmi", "127.0.0.1", {0: backends[0].opener()})
    assert proxies.targets == {}
