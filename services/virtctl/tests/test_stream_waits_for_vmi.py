"""`console --timeout`: a VMI not there or not running yet is waited for, a refusal is not."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING

import pytest
from aiohttp import web
from kube_runtime import KubeClient
from kubernetes_asyncio.client import ApiClient, Configuration
from virtctl import streams
from virtctl.commands.subresource import Cluster, SubresourceError
from virtctl.streams import relay_stream

if TYPE_CHECKING:
    from conftest import LoopbackCert


class SlowVmi:
    """A console subresource that answers `refusal` `refusals` times, then serves a line."""

    def __init__(self, refusal: int, refusals: int) -> None:
        self.refusal = refusal
        self.left = refusals
        self.attempts = 0

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.attempts += 1
        if self.left > 0:
            self.left -= 1
            return web.Response(status=self.refusal, text="VMI is not running")
        ws = web.WebSocketResponse(protocols=("binary.kubevirt.io",))
        await ws.prepare(request)
        await ws.send_bytes(b"login: ")
        await ws.close()
        return ws


Serve = Callable[[SlowVmi], Awaitable[Cluster]]


@pytest.fixture
def fast_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(streams, "_RETRY_EVERY", 0.01)


@pytest.fixture
async def serve(loopback_cert: LoopbackCert) -> AsyncIterator[Serve]:
    runners: list[web.AppRunner] = []
    clients: list[KubeClient] = []

    async def start(vmi: SlowVmi) -> Cluster:
        app = web.Application()
        app.router.add_get("/{tail:.*}", vmi.handle)
        runner = web.AppRunner(app)
        await runner.setup()
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(loopback_cert.cert, loopback_cert.key)
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=tls)
        await site.start()
        runners.append(runner)
        server = f"https://127.0.0.1:{runner.addresses[0][1]}"
        config = Configuration(host=server, ssl_ca_cert=str(loopback_cert.cert))
        client = KubeClient(ApiClient(config))
        clients.append(client)
        return Cluster(client, "default", server)

    yield start
    for client in clients:
        await client.close()
    for runner in runners:
        await runner.cleanup()


async def test_not_running_yet_is_waited_for(serve: Serve, fast_retries: None) -> None:
    vmi = SlowVmi(409, refusals=3)
    cluster = await serve(vmi)
    shown = bytearray()
    await relay_stream(cluster, "vm1", "console", shown.extend, None, connect_within=5)
    assert bytes(shown) == b"login: "
    assert vmi.attempts == 4


async def test_the_wait_reports_its_reason_once(serve: Serve, fast_retries: None) -> None:
    vmi = SlowVmi(409, refusals=3)
    cluster = await serve(vmi)
    told: list[str] = []
    await relay_stream(
        cluster, "vm1", "console", bytearray().extend, None, connect_within=5, progress=told.append
    )
    assert len(told) == 1  # the same refusal three times is one line
    assert told[0].startswith("waiting (0s of 5s): ")
    assert "409" in told[0]


async def test_without_a_wait_the_first_refusal_is_the_answer(
    serve: Serve, fast_retries: None
) -> None:
    vmi = SlowVmi(409, refusals=1)
    cluster = await serve(vmi)
    with pytest.raises(SubresourceError) as caught:
        await relay_stream(cluster, "vm1", "console", bytearray().extend, None)
    assert caught.value.status == 409
    assert vmi.attempts == 1


async def test_a_forbidden_console_is_not_retried(serve: Serve, fast_retries: None) -> None:
    vmi = SlowVmi(403, refusals=1)
    cluster = await serve(vmi)
    with pytest.raises(SubresourceError, match="403"):
        await relay_stream(cluster, "vm1", "console", bytearray().extend, None, connect_within=5)
    assert vmi.attempts == 1
