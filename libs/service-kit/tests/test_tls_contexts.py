"""Server and mutual-TLS client contexts: the right peers get in, the others are refused."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

import aiohttp
import pytest
from aiohttp import web
from service_kit import (
    Health,
    ServiceRunner,
    TCPListener,
    TLSError,
    TLSFiles,
    add_health_routes,
    client_context,
    server_context,
)

if TYPE_CHECKING:
    from conftest import Pki


@pytest.fixture
async def mtls_url(pki: Pki) -> AsyncIterator[str]:
    cert, key = pki.issue("virt-api")
    context = server_context(TLSFiles(cert, key, pki.ca_path), require_client_cert=True)
    app = web.Application()
    add_health_routes(app, Health())
    runner = ServiceRunner(app, [TCPListener("127.0.0.1", 0, context)], signals=())
    await runner.start()
    _, port = runner.addresses[0]  # type: ignore[misc]
    yield f"https://127.0.0.1:{port}/healthz"
    runner.request_stop()
    await runner.wait()


async def get(url: str, context: ssl.SSLContext) -> int:
    async with aiohttp.ClientSession() as session, session.get(url, ssl=context) as response:
        return response.status


async def test_client_with_certificate_from_our_ca_gets_in(pki: Pki, mtls_url: str) -> None:
    cert, key = pki.issue("virt-handler", client=True)
    assert await get(mtls_url, client_context(TLSFiles(cert, key, pki.ca_path))) == 200


async def test_client_without_certificate_is_refused(pki: Pki, mtls_url: str) -> None:
    with pytest.raises(aiohttp.ClientError):
        await get(mtls_url, client_context(TLSFiles(ca=pki.ca_path)))


async def test_client_trusting_another_ca_refuses_the_server(
    pki: Pki, stranger_pki: Pki, mtls_url: str
) -> None:
    cert, key = pki.issue("virt-handler", client=True)
    with pytest.raises(aiohttp.ClientConnectorCertificateError):
        await get(mtls_url, client_context(TLSFiles(cert, key, stranger_pki.ca_path)))


async def test_client_certificate_from_another_ca_is_refused(
    pki: Pki, stranger_pki: Pki, mtls_url: str
) -> None:
    cert, key = stranger_pki.issue("intruder", client=True)
    with pytest.raises(aiohttp.ClientError):
        await get(mtls_url, client_context(TLSFiles(cert, key, pki.ca_path)))


def test_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(TLSError, match=r"tls\.crt: no such file"):
        server_context(TLSFiles(tmp_path / "tls.crt", tmp_path / "tls.key"))


def test_key_of_another_certificate_is_refused(pki: Pki) -> None:
    cert, _ = pki.issue("a")
    _, other_key = pki.issue("b")
    with pytest.raises(TLSError, match="cannot load TLS material"):
        server_context(TLSFiles(cert, other_key))


def test_incomplete_options_are_refused(pki: Pki) -> None:
    cert, key = pki.issue("a")
    with pytest.raises(TLSError, match="needs a ca"):
        server_context(TLSFiles(cert, key), require_client_cert=True)
    with pytest.raises(TLSError, match="both cert and key"):
        client_context(TLSFiles(cert=cert))


@pytest.fixture
async def optional_url(pki: Pki, stranger_pki: Pki) -> AsyncIterator[str]:
    """A server that takes clients without certificates, or with one from `pki` (as PEM)."""
    cert, key = stranger_pki.issue("virt-api")
    context = server_context(
        TLSFiles(cert, key), optional_client_cert=True, client_ca_pem=pki.ca_path.read_text()
    )
    app = web.Application()

    async def peer(request: web.Request) -> web.Response:
        transport = request.transport
        seen = transport.get_extra_info("peercert") if transport is not None else None
        return web.Response(text="certificate" if seen else "anonymous")

    app.router.add_get("/peer", peer)
    runner = ServiceRunner(app, [TCPListener("127.0.0.1", 0, context)], signals=())
    await runner.start()
    _, port = runner.addresses[0]  # type: ignore[misc]
    yield f"https://127.0.0.1:{port}/peer"
    runner.request_stop()
    await runner.wait()


async def peer_seen(url: str, context: ssl.SSLContext) -> str:
    async with aiohttp.ClientSession() as session, session.get(url, ssl=context) as response:
        return await response.text()


async def test_optional_client_certificate_verified_only_when_offered(
    pki: Pki, stranger_pki: Pki, optional_url: str
) -> None:
    trust = stranger_pki.ca_path
    assert await peer_seen(optional_url, client_context(TLSFiles(ca=trust))) == "anonymous"
    cert, key = pki.issue("front-proxy-client", client=True)
    assert await peer_seen(optional_url, client_context(TLSFiles(cert, key, trust))) == (
        "certificate"
    )
    # A certificate from any other CA (the serving CA included) fails the handshake.
    cert, key = stranger_pki.issue("intruder", client=True)
    with pytest.raises(aiohttp.ClientError):
        await peer_seen(optional_url, client_context(TLSFiles(cert, key, trust)))


def test_client_verification_needs_a_ca_and_one_mode(pki: Pki) -> None:
    cert, key = pki.issue("a")
    with pytest.raises(TLSError, match="needs a ca"):
        server_context(TLSFiles(cert, key), optional_client_cert=True)
    with pytest.raises(TLSError, match="either required or optional"):
        server_context(
            TLSFiles(cert, key, pki.ca_path), require_client_cert=True, optional_client_cert=True
        )
    with pytest.raises(TLSError, match="client CA"):
        server_context(TLSFiles(cert, key), optional_client_cert=True, client_ca_pem="not a PEM")
