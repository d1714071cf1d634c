"""The relay answers only virt-api: a client certificate signed by --client-ca (mutual TLS)."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import aiohttp
import pytest
from aiohttp import web
from service_kit import TLSFiles, client_context, server_context
from virt_handler.app import _relay_needs_client_cert
from virt_handler.podfiles import PodFiles
from virt_handler.relay import relay_routes

if TYPE_CHECKING:
    from pathlib import Path

    from conftest import Authority

PAUSE = "/v1/namespaces/ns/virtualmachineinstances/vm/pause"


@dataclass
class Sync:
    """What the relay's command route asks of VmiSync."""

    commands: list[tuple[str, str, str]] = field(default_factory=list)

    async def command(self, namespace: str, name: str, action: str) -> None:
        self.commands.append((namespace, name, action))


@dataclass
class Relay:
    sync: Sync
    tls_url: str
    plain_url: str
    cluster: Authority

    def client(self, issuer: Authority | None = None) -> ssl.SSLContext:
        """A client trusting the relay, with a certificate from `issuer` (None: none)."""
        if issuer is None:
            return client_context(TLSFiles(None, None, self.cluster.ca))
        cert, key = issuer.issue("virt-api")
        return client_context(TLSFiles(cert, key, self.cluster.ca))


@pytest.fixture
async def relay(authority: Callable[[str], Authority], tmp_path: Path) -> AsyncIterator[Relay]:
    cluster = authority("cluster-ca")
    cert, key = cluster.issue("virt-handler", server=True)
    sync = Sync()
    # The app as virt-handler builds it: relay routes behind the client-cert middleware,
    # served on a mutual-TLS listener and on the plain metrics listener.
    app = web.Application(middlewares=[_relay_needs_client_cert])
    app.add_routes(relay_routes(sync, PodFiles(tmp_path / "pods")))  # type: ignore[arg-type]
    runner = web.AppRunner(app)
    await runner.setup()
    tls = web.TCPSite(
        runner,
        "127.0.0.1",
        0,
        ssl_context=server_context(TLSFiles(cert, key, cluster.ca), require_client_cert=True),
    )
    plain = web.TCPSite(runner, "127.0.0.1", 0)
    await tls.start()
    await plain.start()
    try:
        yield Relay(sync, tls.name, plain.name, cluster)
    finally:
        await runner.cleanup()


async def test_virt_apis_certificate_reaches_the_command(relay: Relay) -> None:
    async with (
        aiohttp.ClientSession() as session,
        session.put(relay.tls_url + PAUSE, ssl=relay.client(relay.cluster)) as response,
    ):
        assert response.status == 200
    assert relay.sync.commands == [("ns", "vm", "pause")]


async def test_a_certificate_from_another_ca_is_refused(
    relay: Relay, authority: Callable[[str], Authority]
) -> None:
    stranger = authority("stranger-ca")
    async with aiohttp.ClientSession() as session:
        with pytest.raises(aiohttp.ClientError):
            async with session.put(relay.tls_url + PAUSE, ssl=relay.client(stranger)):
                pass
    assert relay.sync.commands == []


async def test_no_certificate_is_refused(relay: Relay) -> None:
    async with aiohttp.ClientSession() as session:
        with pytest.raises(aiohttp.ClientError):
            async with session.put(relay.tls_url + PAUSE, ssl=relay.client()):
                pass
    assert relay.sync.commands == []


async def test_the_plain_metrics_listener_never_serves_the_relay(relay: Relay) -> None:
    async with (
        aiohttp.ClientSession() as session,
        session.put(relay.plain_url + PAUSE) as response,
    ):
        assert response.status == 403
    assert relay.sync.commands == []
