"""The VNC proxy relays a viewer's connection; a viewer that resets it ends only that one."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, cast

import pytest
from aiohttp import web
from kube_runtime import KubeClient
from kubernetes_asyncio.client import ApiClient, Configuration
from virtctl.commands.subresource import Cluster
from virtctl.commands.vnc import relay_connection

if TYPE_CHECKING:
    from conftest import LoopbackCert


def _server_tls(cert: LoopbackCert) -> ssl.SSLContext:
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert.cert, cert.key)
    return server


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
async def cluster(loopback_cert: LoopbackCert) -> AsyncIterator[tuple[Cluster, FakeDisplay]]:
    display = FakeDisplay()
    app = web.Application()
    app.router.add_get("/{tail:.*}", display.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=_server_tls(loopback_cert))
    await site.start()
    port = runner.addresses[0][1]
    server = f"https://127.0.0.1:{port}"
    client = KubeClient(ApiClient(Configuration(host=server, ssl_ca_cert=str(loopback_cert.cert))))
    async with client:
        yield Cluster(client, "default", server), display
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
