"""Token files as credentials: the only one sent, re-read as they rotate (also in a pod)."""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from kube_runtime import (
    CONFIGMAPS,
    ConfigOverrides,
    KubeClient,
    KubeconfigError,
    ManualClock,
    TokenFile,
    connect,
    load_configuration,
)
from kube_runtime.kubeconfig import load_kubeconfig


class Recorder:
    def __init__(self) -> None:
        self.authorization: list[str | None] = []

    async def handle(self, request: web.Request) -> web.Response:
        self.authorization.append(request.headers.get("Authorization"))
        return web.json_response({"metadata": {"name": "x"}})


@pytest.fixture
async def server() -> AsyncIterator[tuple[Recorder, str]]:
    recorder = Recorder()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", recorder.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield recorder, f"http://127.0.0.1:{port}"
    await runner.cleanup()


def kubeconfig(tmp_path: Path, server: str, user: str) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(
        "current-context: c\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
        f"clusters: [{{name: k, cluster: {{server: '{server}'}}}}]\n"
        f"users: [{{name: u, user: {user}}}]\n"
    )
    return path


async def test_a_token_file_replaces_the_kubeconfig_user_and_follows_rotation(
    server: tuple[Recorder, str], tmp_path: Path
) -> None:
    recorder, url = server
    config = kubeconfig(tmp_path, url, "{token: admin}")
    token = tmp_path / "token"
    token.write_text("first\n")
    clock = ManualClock()
    client = await connect(config, token_file=token, clock=clock)
    async with client:
        await client.get(CONFIGMAPS, "a", "ns")
        token.write_text("second\n")
        await client.get(CONFIGMAPS, "a", "ns")  # re-read at most once a minute
        await clock.advance(61)
        await client.get(CONFIGMAPS, "a", "ns")
        token.write_text("")  # a rotation caught half-way keeps the last good token
        await clock.advance(61)
        await client.get(CONFIGMAPS, "a", "ns")
    assert recorder.authorization == [
        "Bearer first",
        "Bearer first",
        "Bearer second",
        "Bearer second",
    ]


def client_pair(directory: Path) -> Path:
    """A self-signed certificate and its key in one PEM file."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "system:admin")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    path = directory / "admin.pem"
    path.write_bytes(
        cert.public_bytes(serialization.Encoding.PEM)
        + key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return path


async def test_a_token_file_drops_the_client_certificate(tmp_path: Path) -> None:
    # Both would be sent otherwise, and the API server believes the certificate first.
    pair = client_pair(tmp_path)
    user = f"{{client-certificate: {pair}, client-key: {pair}}}"
    config = kubeconfig(tmp_path, "https://127.0.0.1:9", user)
    assert (await load_configuration(config)).cert_file == str(pair)
    (tmp_path / "token").write_text("sa-token\n")
    with_token = await load_configuration(config, token_file=tmp_path / "token")
    assert with_token.cert_file is None
    assert with_token.key_file is None
    assert with_token.api_key["BearerToken"] == "Bearer sa-token"


async def test_an_unreadable_token_file_is_named(tmp_path: Path) -> None:
    config = kubeconfig(tmp_path, "http://127.0.0.1:9", "{}")
    with pytest.raises(KubeconfigError, match="missing"):
        await load_configuration(config, token_file=tmp_path / "missing")
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(KubeconfigError, match="empty"):
        await TokenFile.load(tmp_path / "empty")
    with pytest.raises(KubeconfigError, match="pass one"):
        await load_kubeconfig(ConfigOverrides(config, token="t", token_file=tmp_path / "empty"))


async def test_in_cluster_reads_the_service_account_token_as_it_rotates(
    server: tuple[Recorder, str], tmp_path: Path
) -> None:
    recorder, url = server
    account = tmp_path / "sa"
    account.mkdir()
    (account / "token").write_text("pod-token")
    (account / "ca.crt").write_text("a CA bundle\n")
    env = {
        "HOME": str(tmp_path),
        "KUBERNETES_SERVICE_HOST": "10.0.0.1",
        "KUBERNETES_SERVICE_PORT": "443",
    }
    clock = ManualClock()
    loaded = await load_kubeconfig(environ=env, service_account_dir=account, clock=clock)
    config = loaded.configuration
    assert config.host == "https://10.0.0.1:443"
    # The in-cluster address is not reachable from a unit test: talk to the recorder.
    config.host, config.ssl_ca_cert = url, None
    async with KubeClient.from_config(loaded, clock=clock) as client:
        await client.get(CONFIGMAPS, "a", "ns")
        (account / "token").write_text("rotated")
        await clock.advance(61)
        await client.get(CONFIGMAPS, "a", "ns")
    assert recorder.authorization == ["Bearer pod-token", "Bearer rotated"]
