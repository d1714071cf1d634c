"""The VNC proxy relays a viewer's connection; a viewer that resets it ends only that one."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import cast

import pytest
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from virtctl.commands.subresource import Cluster
from virtctl.commands.vnc import relay_connection


def _tls(tmp: Path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """(server context, client context trusting it) for 127.0.0.1."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fake-apiserver")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    (tmp / "srv.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (tmp / "srv.key").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(tmp / "srv.crt", tmp / "srv.key")
    return server, ssl.create_default_context(cafile=str(tmp / "srv.crt"))


class FakeDisplay:
    """A vnc subresource that sends a greeting and records what the viewer typed."""

    def __init__(self) -> None:
        self.received: list[bytes] = []

    async def handle(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(protocols=("binary.kubevirt.io",))
        await ws.prepare(request)
        await ws.send_bytes(b"RFB 003.008\n")
        async for message in ws:
            self.received.append(bytes(message.data))
        return ws


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[tuple[Cluster, FakeDisplay]]:
    server_tls, client_tls = _tls(tmp_path)
    display = FakeDisplay()
    app = web.Application()
    app.router.add_get("/{tail:.*}", display.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=server_tls)
    await site.start()
    port = runner.addresses[0][1]
    yield Cluster(f"https://127.0.0.1:{port}", "default", client_tls), display
    await runner.cleanup()


class Viewer:
    """The viewer's end of one connection: a reader we feed, a writer that records."""

    def __init__(self) -> None:
        self.reader = asyncio.StreamReader()
        self.shown = bytearray()
        self.closed = False

    def write(self, data: bytes) -> None:
        self.shown.extend(data)

    async def drain(self) -> None:
        return None

    def close(self) -> None:
        self.closed = True

    def writer(self) -> asyncio.StreamWriter:
        return cast(asyncio.StreamWriter, self)


async def test_bytes_flow_both_ways_until_the_viewer_closes(
    cluster: tuple[Cluster, FakeDisplay],
) -> None:
    target, display = cluster
    viewer = Viewer()
    viewer.reader.feed_data(b"RFB 003.008\n")
    viewer.reader.feed_eof()
    await asyncio.wait_for(relay_connection(target, "vm1", viewer.reader, viewer.writer()), 10)
    assert viewer.closed
    assert display.received == [b"RFB 003.008\n"]


async def test_a_viewer_that_resets_ends_its_connection_without_an_error(
    cluster: tuple[Cluster, FakeDisplay], capsys: pytest.CaptureFixture[str]
) -> None:
    target, _ = cluster
    viewer = Viewer()
    viewer.reader.set_exception(ConnectionResetError(104, "Connection reset by peer"))
    # Raising here would reach asyncio's "Unhandled exception in client_connected_cb",
    # a traceback on the user's terminal.
    await asyncio.wait_for(relay_connection(target, "vm1", viewer.reader, viewer.writer()), 10)
    assert viewer.closed
    assert capsys.readouterr().err == ""
