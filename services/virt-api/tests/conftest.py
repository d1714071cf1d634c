"""Unit-test fixtures for virt-api: certificates, a fake API server seam, test clients."""

from __future__ import annotations

import datetime
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from kubevirt_api.admission import ClusterConfig
from virt_api import (
    AdmissionContext,
    ApiStatusError,
    FrontProxyConfig,
    SubresourceContext,
    build_app,
)


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


@dataclass
class FakeApi:
    """KubeApi double: canned objects by path, every request recorded."""

    objects: dict[str, Any] = field(default_factory=dict)
    calls: list[tuple[str, str, Any, Mapping[str, str] | None]] = field(default_factory=list)
    allow: Callable[[Mapping[str, Any]], bool] = lambda spec: True
    patch_error: ApiStatusError | None = None

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        content_type: str = "application/json",
        params: Mapping[str, str] | None = None,
    ) -> Any:
        self.calls.append((method, path, body, params))
        if path.endswith("/subjectaccessreviews"):
            return {"status": {"allowed": self.allow(body["spec"]), "reason": "RBAC says no"}}
        if method == "GET":
            if path in self.objects:
                return self.objects[path]
            raise ApiStatusError(404, {"message": "not found"})
        if method == "PATCH" and self.patch_error is not None:
            raise self.patch_error
        return {}

    def patches(self) -> list[tuple[str, Any, Mapping[str, str] | None]]:
        return [(p, b, q) for m, p, b, q in self.calls if m == "PATCH"]


class NoHandler:
    """HandlerClient that must not be called."""

    async def command(
        self, vmi: Mapping[str, Any], action: str, body: Mapping[str, Any] | None = None
    ) -> None:
        raise AssertionError("unexpected handler call")

    async def guest_os_info(self, vmi: Mapping[str, Any]) -> Mapping[str, Any]:
        raise AssertionError("unexpected handler call")

    async def open_stream(self, vmi: Mapping[str, Any], kind: str) -> Any:
        raise AssertionError("unexpected handler call")


@pytest.fixture
def authority(tmp_path: Path) -> Callable[[str], Authority]:
    return lambda name: Authority(tmp_path, name)


@pytest.fixture
def fake_api() -> FakeApi:
    return FakeApi()


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
        admission_context(), SubresourceContext(fake_api, FrontProxyConfig(), NoHandler())
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
async def proxied(
    authority: Callable[[str], Authority], fake_api: FakeApi, no_handler: NoHandler
) -> AsyncIterator[ProxiedClient]:
    """virt-api over real TLS, reached with a front-proxy certificate as user alice."""
    import socket
    import ssl

    import aiohttp
    from aiohttp import web
    from virt_api.server import server_ssl_context

    serving = authority("serving")
    proxy_ca = authority("front-proxy")
    server = serving.issue("server", "virt-api", server=True)
    front = FrontProxyConfig(ca_pem=proxy_ca.pem, allowed_names=frozenset({"front-proxy-client"}))
    app = build_app(admission_context(), SubresourceContext(fake_api, front, no_handler))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(
        runner,
        "127.0.0.1",
        port,
        ssl_context=server_ssl_context(str(server.cert), str(server.key), proxy_ca.pem),
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
