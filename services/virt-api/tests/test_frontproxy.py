"""Forwarded identities are trusted only from the front proxy, over real TLS."""

from __future__ import annotations

import socket
import ssl
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from virt_api import FrontProxyConfig, SubresourceContext, build_app
from virt_api.server import serving_tls

PATH = "/apis/subresources.kubevirt.io/v1/namespaces/default/virtualmachines/vm1/start"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Setup:
    def __init__(self, authority: Callable[[str], Any], fake_api: Any) -> None:
        self.serving_ca = authority("serving")
        self.proxy_ca = authority("front-proxy")
        self.other_ca = authority("other")
        self.server = self.serving_ca.issue("server", "virt-api", server=True)
        self.api = fake_api
        self.api.objects["/apis/kubevirt.io/v1/namespaces/default/virtualmachines/vm1"] = {
            "metadata": {"name": "vm1", "namespace": "default"},
            "spec": {"runStrategy": "Halted", "template": {}},
        }
        self.port = _free_port()

    def client_ssl(self, cert: Any) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.serving_ca.path))
        if cert is not None:
            context.load_cert_chain(str(cert.cert), str(cert.key))
        return context


@pytest.fixture
async def setup(
    authority: Callable[[str], Any], fake_api: Any, no_handler: Any, admission: Callable[..., Any]
) -> AsyncIterator[Setup]:
    s = Setup(authority, fake_api)
    front = FrontProxyConfig(ca_pem=s.proxy_ca.pem, allowed_names=frozenset({"front-proxy-client"}))
    app = build_app(admission(), SubresourceContext(s.api.client, front, no_handler))
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(
        runner,
        "127.0.0.1",
        s.port,
        ssl_context=serving_tls(str(s.server.cert), str(s.server.key), s.proxy_ca.pem).context,
    )
    await site.start()
    yield s
    await runner.cleanup()


async def put(s: Setup, cert: Any, headers: dict[str, str]) -> tuple[int, Any]:
    async with (
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=s.client_ssl(cert))) as session,
        session.put(f"https://localhost:{s.port}{PATH}", headers=headers) as response,
    ):
        return response.status, await response.json(content_type=None)


async def test_forged_user_without_client_cert_is_refused(setup: Setup) -> None:
    status, body = await put(
        setup, None, {"X-Remote-User": "system:admin", "X-Remote-Group": "system:masters"}
    )
    assert status == 401
    assert "front proxy" in body["message"]
    assert setup.api.patches() == []


async def test_client_cert_from_another_ca_fails_the_handshake(setup: Setup) -> None:
    forged = setup.other_ca.issue("forged", "front-proxy-client")
    with pytest.raises(aiohttp.ClientError):
        await put(setup, forged, {"X-Remote-User": "system:admin"})


async def test_proxy_ca_cert_with_wrong_cn_is_refused(setup: Setup) -> None:
    wrong = setup.proxy_ca.issue("wrong", "someone-else")
    status, body = await put(setup, wrong, {"X-Remote-User": "alice"})
    assert status == 401
    assert "someone-else" in body["message"]


async def test_front_proxy_user_is_authorized_by_sar(setup: Setup) -> None:
    proxy = setup.proxy_ca.issue("proxy", "front-proxy-client")
    setup.api.allow = lambda spec: spec["user"] == "alice"
    status, _ = await put(setup, proxy, {"X-Remote-User": "alice", "X-Remote-Group": "devs"})
    assert status == 202
    sar = next(b for m, p, b, _ in setup.api.calls if p.endswith("subjectaccessreviews"))
    assert sar["spec"]["groups"] == ["devs"]
    assert sar["spec"]["resourceAttributes"] == {
        "namespace": "default",
        "verb": "update",
        "group": "subresources.kubevirt.io",
        "version": "v1",
        "resource": "virtualmachines",
        "subresource": "start",
        "name": "vm1",
    }
    assert setup.api.patches()[0][0].endswith("/virtualmachines/vm1")


async def test_user_without_rbac_gets_403(setup: Setup) -> None:
    proxy = setup.proxy_ca.issue("proxy", "front-proxy-client")
    setup.api.allow = lambda spec: False
    status, body = await put(setup, proxy, {"X-Remote-User": "mallory"})
    assert status == 403
    assert 'User "mallory" cannot update resource "virtualmachines/start"' in body["message"]
    assert setup.api.patches() == []
