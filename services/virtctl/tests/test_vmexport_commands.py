"""vmexport create|delete|download against a fake API server and a fake exporter on
loopback (real TLS, checked against the export's own certificate; the token header)."""

from __future__ import annotations

import asyncio
import base64
import datetime
import gzip
import socket
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import aiohttp
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from virtctl.cli import main
from virtctl.exporting import _pump_port_forward

if TYPE_CHECKING:
    from conftest import Routes

EXPORTS = "/apis/export.kubevirt.io/v1/namespaces/team-a/virtualmachineexports"
HOST = "virt-export-exp.team-a.svc"
TOKEN = "the-export-token"
IMAGE = bytes(range(256)) * 4096 + b"tail"
GZ = gzip.compress(IMAGE, mtime=0)


def _cert(host: str, tmp_path: Path) -> tuple[str, Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(7)
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(host)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(key, hashes.SHA256())
    )
    pem = cert.public_bytes(serialization.Encoding.PEM)
    (tmp_path / f"{host}.crt").write_bytes(pem)
    (tmp_path / f"{host}.key").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return pem.decode(), tmp_path / f"{host}.crt", tmp_path / f"{host}.key"


@dataclass
class Exporter:
    port: int
    cert_pem: str
    seen: list[tuple[str, str | None, str | None]]


@pytest.fixture
def exporter(tmp_path: Path) -> Iterator[Exporter]:
    """An HTTPS exporter on 127.0.0.1 for HOST, serving disk.img and disk.img.gz."""
    pem, cert, key = _cert(HOST, tmp_path)
    seen: list[tuple[str, str | None, str | None]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            token = self.headers.get("x-kubevirt-export-token")
            seen.append((self.path, token, self.headers.get("Host")))
            if token != TOKEN:
                self.send_response(401)
                self.end_headers()
                return
            body = {
                "/volumes/disk/disk.img": IMAGE,
                "/volumes/disk/disk.img.gz": GZ,
            }.get(self.path)
            if body is None:
                self.send_response(404)
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(str(cert), str(key))
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield Exporter(httpd.server_address[1], pem, seen)
    httpd.shutdown()


def ready_export(cert: str, volumes: list[str] | None = None) -> dict[str, Any]:
    names = volumes or ["disk"]
    return {
        "metadata": {"name": "exp", "namespace": "team-a"},
        "status": {
            "phase": "Ready",
            "serviceName": "virt-export-exp",
            "tokenSecretRef": "export-token-exp",
            "links": {
                "internal": {
                    "cert": cert,
                    "volumes": [
                        {
                            "name": n,
                            "formats": [
                                {"format": "raw", "url": f"https://{HOST}/volumes/{n}/disk.img"},
                                {
                                    "format": "gzip",
                                    "url": f"https://{HOST}/volumes/{n}/disk.img.gz",
                                },
                            ],
                        }
                        for n in names
                    ],
                }
            },
        },
    }


def cluster_answers(api: Routes, export: dict[str, Any], port: int) -> None:
    api.answers[("GET", f"{EXPORTS}/exp")] = (200, export)
    api.answers[("GET", "/api/v1/namespaces/team-a/secrets/export-token-exp")] = (
        200,
        {"data": {"token": base64.b64encode(TOKEN.encode()).decode()}},
    )
    api.answers[("GET", "/api/v1/namespaces/team-a/pods/virt-export-exp")] = (
        200,
        {
            "spec": {"containers": [{"name": "exportserver", "ports": [{"containerPort": port}]}]},
            "status": {"podIP": "127.0.0.1"},
        },
    )


def test_create_posts_a_pvc_export_with_its_ttl(api: Routes, tmp_path: Path) -> None:
    argv = ["vmexport", "create", "exp", "--pvc", "disk", "--ttl", "30m"]
    assert main([*argv, "--kubeconfig", api.kubeconfig(tmp_path)]) == 0
    ((method, path, _, body),) = api.requests
    assert (method, path) == ("POST", EXPORTS)
    assert body["spec"] == {
        "source": {"apiGroup": "", "kind": "PersistentVolumeClaim", "name": "disk"},
        "ttlDuration": "30m",
    }


def test_create_of_a_vm_names_kubevirts_group(api: Routes, tmp_path: Path) -> None:
    assert (
        main(["vmexport", "create", "exp", "--vm", "vm1", "--kubeconfig", api.kubeconfig(tmp_path)])
        == 0
    )
    assert api.requests[0][3]["spec"]["source"] == {
        "apiGroup": "kubevirt.io",
        "kind": "VirtualMachine",
        "name": "vm1",
    }


def test_create_needs_a_source_and_a_valid_ttl(
    api: Routes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = api.kubeconfig(tmp_path)
    assert main(["vmexport", "create", "exp", "--kubeconfig", config]) == 1
    assert "one of --pvc, --vm or --snapshot is required" in capsys.readouterr().err
    assert (
        main(["vmexport", "create", "exp", "--pvc", "d", "--ttl", "soon", "--kubeconfig", config])
        == 1
    )
    assert "--ttl: invalid duration 'soon'" in capsys.readouterr().err
    assert api.requests == []


def test_delete_deletes_and_says_when_absent(
    api: Routes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = api.kubeconfig(tmp_path)
    assert main(["vmexport", "delete", "exp", "--kubeconfig", config]) == 0
    assert api.requests[0][:2] == ("DELETE", f"{EXPORTS}/exp")
    assert "deleted successfully" in capsys.readouterr().out
    api.answers[("DELETE", f"{EXPORTS}/exp")] = (
        404,
        {"kind": "Status", "code": 404, "reason": "NotFound", "message": "gone"},
    )
    assert main(["vmexport", "delete", "exp", "--kubeconfig", config]) == 0
    assert "does not exist" in capsys.readouterr().out


@pytest.mark.parametrize(("fmt", "expected"), [("raw", IMAGE), ("gzip", GZ)])
def test_download_writes_the_volume_then_deletes_the_export(
    api: Routes, exporter: Exporter, tmp_path: Path, fmt: str, expected: bytes
) -> None:
    cluster_answers(api, ready_export(exporter.cert_pem), exporter.port)
    out = tmp_path / "disk.out"
    argv = ["vmexport", "download", "exp", "--output", str(out), "--format", fmt]
    assert main([*argv, "--kubeconfig", api.kubeconfig(tmp_path)]) == 0
    if fmt == "gzip":
        assert gzip.decompress(out.read_bytes()) == IMAGE
    assert out.read_bytes() == expected
    suffix = ".gz" if fmt == "gzip" else ""
    assert exporter.seen == [(f"/volumes/disk/disk.img{suffix}", TOKEN, HOST)]
    assert api.requests[-1][:2] == ("DELETE", f"{EXPORTS}/exp")


def test_download_with_keep_vme_keeps_it(api: Routes, exporter: Exporter, tmp_path: Path) -> None:
    cluster_answers(api, ready_export(exporter.cert_pem), exporter.port)
    argv = ["vmexport", "download", "exp", "--output", str(tmp_path / "o"), "--keep-vme"]
    assert main([*argv, "--kubeconfig", api.kubeconfig(tmp_path)]) == 0
    assert all(r[0] != "DELETE" for r in api.requests)


def test_a_certificate_for_another_host_is_refused_unless_insecure(
    api: Routes, exporter: Exporter, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other, _, _ = _cert("someone-else.team-a.svc", tmp_path)
    cluster_answers(api, ready_export(other), exporter.port)
    argv = ["vmexport", "download", "exp", "--output", str(tmp_path / "o"), "--keep-vme"]
    config = api.kubeconfig(tmp_path)
    assert main([*argv, "--kubeconfig", config]) == 1
    assert "certificate verify failed" in capsys.readouterr().err
    assert exporter.seen == []
    assert main([*argv, "--insecure", "--kubeconfig", config]) == 0
    assert (tmp_path / "o").read_bytes() == GZ


def test_several_volumes_need_volume(
    api: Routes, exporter: Exporter, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster_answers(api, ready_export(exporter.cert_pem, ["disk", "data"]), exporter.port)
    argv = ["vmexport", "download", "exp", "--output", str(tmp_path / "o"), "--keep-vme"]
    config = api.kubeconfig(tmp_path)
    assert main([*argv, "--kubeconfig", config]) == 1
    assert "--volume: the export has 2 volumes; choose one of disk, data" in capsys.readouterr().err
    assert main([*argv, "--volume", "nope", "--kubeconfig", config]) == 1
    assert "--volume: 'nope' is not exported" in capsys.readouterr().err
    assert main([*argv, "--volume", "disk", "--format", "raw", "--kubeconfig", config]) == 0
    assert (tmp_path / "o").read_bytes() == IMAGE


def test_a_skipped_export_says_why_and_downloads_nothing(
    api: Routes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    api.answers[("GET", f"{EXPORTS}/exp")] = (
        200,
        {
            "status": {
                "phase": "Skipped",
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "False",
                        "reason": "VMNoVolumes",
                        "message": "Virtual Machine team-a/vm has no volumes",
                    }
                ],
            }
        },
    )
    argv = ["vmexport", "download", "exp", "--vm", "vm", "--output", str(tmp_path / "o")]
    assert main([*argv, "--kubeconfig", api.kubeconfig(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "is Skipped (VMNoVolumes: Virtual Machine team-a/vm has no volumes)" in err
    methods = [r[0] for r in api.requests]
    assert methods == ["POST", "GET", "DELETE"]  # created first, deleted after


def test_not_ready_in_time_names_the_phase_and_reason(
    api: Routes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    api.answers[("GET", f"{EXPORTS}/exp")] = (
        200,
        {"status": {"phase": "Pending", "conditions": [{"type": "Ready", "reason": "InUse", "message": "Virtual Machine team-a/vm is running"}]}},
    )  # fmt: skip
    argv = ["vmexport", "download", "exp", "--output", str(tmp_path / "o"), "--keep-vme"]
    argv += ["--readiness-timeout", "0"]
    assert main([*argv, "--kubeconfig", api.kubeconfig(tmp_path)]) == 1
    assert "not Ready after 0s (phase Pending, InUse: Virtual Machine team-a/vm is running)" in (
        capsys.readouterr().err
    )


class FakePortForward:
    """A pod port-forward websocket: the port frames first, then `replies` once the client
    has sent something; frames sent are recorded."""

    def __init__(self, replies: list[bytes]) -> None:
        port = (8443).to_bytes(2, "little")
        self.incoming = [b"\x00" + port, b"\x01" + port]
        self.replies = replies
        self.sent: list[bytes] = []
        self.got = asyncio.Event()
        self.closed = False

    async def send_bytes(self, data: bytes) -> None:
        self.sent.append(data)
        self.got.set()

    def __aiter__(self) -> FakePortForward:
        return self

    async def __anext__(self) -> aiohttp.WSMessage:
        if not self.incoming:
            await self.got.wait()
            self.incoming, self.replies = self.replies, []
            if not self.incoming:
                raise StopAsyncIteration
        return aiohttp.WSMessage(aiohttp.WSMsgType.BINARY, self.incoming.pop(0), None)

    async def close(self) -> None:
        self.closed = True


async def test_port_forward_frames_strip_the_port_prefix_and_tag_data_with_channel_0() -> None:
    ws = FakePortForward([b"\x00hello ", b"\x00world"])
    received = bytearray()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _pump_port_forward(cast(aiohttp.ClientWebSocketResponse, ws), reader, writer)

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    host, local = server.sockets[0].getsockname()[:2]
    reader, writer = await asyncio.open_connection(host, local)
    writer.write(b"GET /")
    await writer.drain()
    while chunk := await reader.read(100):
        received += chunk
    writer.close()
    server.close()
    await server.wait_closed()
    assert bytes(received) == b"hello world"
    assert ws.closed
    assert ws.sent == [b"\x00GET /"]


async def test_port_forward_error_channel_ends_the_connection() -> None:
    ws = FakePortForward([b"\x01connection refused"])
    outcome: list[BaseException] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await _pump_port_forward(cast(aiohttp.ClientWebSocketResponse, ws), reader, writer)
        except Exception as error:
            outcome.append(error)

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    host, local = server.sockets[0].getsockname()[:2]
    reader, writer = await asyncio.open_connection(host, local)
    writer.write(b"GET /")
    await writer.drain()
    assert await reader.read() == b""
    writer.close()
    server.close()
    await server.wait_closed()
    assert [str(e) for e in outcome] == ["port-forward: connection refused"]


def test_an_unreachable_exporter_is_one_line_naming_the_url(
    api: Routes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    cluster_answers(api, ready_export("unused"), closed)
    argv = ["vmexport", "download", "exp", "--output", str(tmp_path / "o"), "--insecure"]
    assert main([*argv, "--kubeconfig", api.kubeconfig(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert f"GET https://{HOST}/volumes/disk/disk.img.gz (via 127.0.0.1:{closed}):" in err
    assert "Traceback" not in err
