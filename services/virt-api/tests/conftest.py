"""Unit-test fixtures for virt-api: certificates, a fake API server, test clients."""

from __future__ import annotations

import contextlib
import datetime
import json
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from kube_runtime import ApiError, KubeClient
from kubernetes_asyncio.client import ApiClient, Configuration
from kubevirt_api.admission import ClusterConfig
from virt_api import (
    AdmissionContext,
    FrontProxyConfig,
    SubresourceContext,
    build_app,
)
from virt_api.server import CLIENT_SETTINGS


@dataclass
class Pem:
    cert: Path
    key: Path
    cert_pem: str


class Authority:
    """A throwaway CA issuing leaf certificates into a temp dir."""

    def __init__(self, directory: Path, name: str) -> None:
        self.directory = directory
        self.key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.UTC)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self.key, hashes.SHA256())
        )
        self.pem = self.cert.public_bytes(serialization.Encoding.PEM).decode()
        self.path = directory / f"{name}-ca.crt"
        self.path.write_text(self.pem)

    def issue(self, name: str, cn: str, *, server: bool = False) -> Pem:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)]))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
        )
        if server:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [
                        x509.DNSName("localhost"),
                        x509.IPAddress(__import__("ipaddress").ip_address("127.0.0.1")),
                    ]
                ),
                critical=False,
            )
        cert = builder.sign(self.key, hashes.SHA256())
        cert_pem = cert.public_bytes(serialization.Encoding.PEM).decode()
        paths = Pem(self.directory / f"{name}.crt", self.directory / f"{name}.key", cert_pem)
        paths.cert.write_text(cert_pem)
        paths.key.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        return paths


def _status(error: ApiError) -> web.Response:
    body = {"kind": "Status", "code": error.status, "reason": error.reason}
    return web.json_response({**body, "message": error.message}, status=error.status)


@dataclass
class FakeApi:
    """The API server on loopback: canned objects by path, every request recorded.

    virt-api reaches it through a real kube_runtime client (`client`, while `running`).
    """

    objects: dict[str, Any] = field(default_factory=dict)
    calls: list[tuple[str, str, Any, Mapping[str, str]]] = field(default_factory=list)
    allow: Callable[[Mapping[str, Any]], bool] = lambda spec: True
    patch_error: ApiError | None = None
    # What every GET answers instead, when set.
    get_error: ApiError | None = None
    client: Any = None
    url: str = ""
    # The Authorization header of every request, in order.
    credentials: list[str | None] = field(default_factory=list)

    async def _handle(self, request: web.Request) -> web.Response:
        raw = await request.read()
        body = json.loads(raw) if raw else None
        method, path = request.method, request.path
        self.calls.append((method, path, body, dict(request.query)))
        self.credentials.append(request.headers.get("Authorization"))
        if path.endswith("/subjectaccessreviews"):
            allowed = self.allow(body["spec"])
            return web.json_response({"status": {"allowed": allowed, "reason": "RBAC says no"}})
        if method == "GET":
            if self.get_error is not None:
                return _status(self.get_error)
            if path in self.objects:
                return web.json_response(self.objects[path])
            return _status(ApiError(404, "NotFound", "not found"))
        if method == "PATCH" and self.patch_error is not None:
            return _status(self.patch_error)
        return web.json_response({})

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[KubeClient]:
        """Serve on a free loopback port; yield the client virt-api would use."""
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        host, port = runner.addresses[0][:2]
        self.url = f"http://{host}:{port}"
        api_client = ApiClient(Configuration(host=self.url))
        try:
            async with KubeClient(api_client, settings=CLIENT_SETTINGS) as client:
                self.client = client
                yield client
        finally:
            self.client = None
            await runner.cleanup()

    def patches(self) -> list[tuple[str, Any, Mapping[str, str]]]:
        return [(p, b, q) for m, p, b, q in self.calls if m == "PATCH"]


class NoHandler:
    """HandlerClient that must not be called."""

    async def command(
        self, vmi: Mapping[str, Any], action: str, body: Mapping[str, Any] | None = None
    ) -> None:
        raise AssertionError("unexpected handler call")

    async def agent_report(self, vmi: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
        raise AssertionError("unexpected handler call")

    async def screenshot(self, vmi: Mapping[str, Any], move_cursor: bool) -> bytes:
        raise AssertionError("unexpected handler call")

    async def open_stream(self, vmi: Mapping[str, Any], kind: str) -> Any:
        raise AssertionError("unexpected handler call")


@pytest.fixture
def authority(tmp_path: Path) -> Callable[[str], Authority]:
    return lambda name: Authority(tmp_path, name)


@pytest.fixture
def new_fake_api() -> Callable[[], FakeApi]:
    """For tests that run their own event loop (the fixture's client is bound to pytest's)."""
    return FakeApi


@pytest.fixture
async def fake_api() -> AsyncIterator[FakeApi]:
    api = FakeApi()
    async with api.running():
        yield api


def admission_context(
    config: ClusterConfig | None = None, users: frozenset[str] = frozenset()
) -> AdmissionContext:
    async def source() -> ClusterConfig:
        return config or ClusterConfig()

    return AdmissionContext(cluster_config=source, kubevirt_users=users)


@pytest.fixture
async def webhook_client(fake_api: FakeApi) -> AsyncIterator[TestClient[Any, Any]]:
    """A plain-HTTP client to the app (webhook routes need no client identity)."""
    app = build_app(
        admission_context(), SubresourceContext(fake_api.client, FrontProxyConfig(), NoHandler())
    )
    async with TestClient(TestServer(app)) as client:
        yield client


@pytest.fixture
def no_handler() -> NoHandler:
    return NoHandler()


@pytest.fixture
def admission() -> Callable[..., AdmissionContext]:
    """Factory for an AdmissionContext with a fixed cluster config."""
    return admission_context


@dataclass
class ProxiedClient:
    """A session that speaks to virt-api as the front proxy does (TLS + proxy cert)."""

    session: Any
    base: str

    def url(self, resource: str, name: str, action: str, namespace: str = "ns1") -> str:
        return f"{self.base}/apis/subresources.kubevirt.io/v1/namespaces/{namespace}/{resource}/{name}/{action}"


@pytest.fixture
def subresource_gates() -> frozenset[str]:
    """The feature gates the subresource API sees (a test module may override this)."""
    return frozenset()


@pytest.fixture
async def proxied(
    authority: Callable[[str], Authority],
    fake_api: FakeApi,
    no_handler: NoHandler,
    subresource_gates: frozenset[str],
) -> AsyncIterator[ProxiedClient]:
    """virt-api over real TLS, reached with a front-proxy certificate as user alice."""
    import socket
    import ssl

    import aiohttp
    from aiohttp import web
    from virt_api.server import serving_tls

    serving = authority("serving")
    proxy_ca = authority("front-proxy")
    server = serving.issue("server", "virt-api", server=True)
    front = FrontProxyConfig(ca_pem=proxy_ca.pem, allowed_names=frozenset({"front-proxy-client"}))

    async def config() -> ClusterConfig:
        return ClusterConfig(feature_gates=subresource_gates)

    app = build_app(
        admission_context(), SubresourceContext(fake_api.client, front, no_handler, config)
    )
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(
        runner,
        "127.0.0.1",
        port,
        ssl_context=serving_tls(str(server.cert), str(server.key), proxy_ca.pem).context,
    ).start()
    cert = proxy_ca.issue("proxy", "front-proxy-client")
    context = ssl.create_default_context(cafile=str(serving.path))
    context.load_cert_chain(str(cert.cert), str(cert.key))
    session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(ssl=context), headers={"X-Remote-User": "alice"}
    )
    yield ProxiedClient(session, f"https://localhost:{port}")
    await session.close()
    await runner.cleanup()
