"""Helpers for virtctl's unit tests: run main() and capture what the user sees."""

from __future__ import annotations

import base64
import datetime
import io
import ipaddress
import json
import ssl
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from virtctl.cli import main

REPO = Path(__file__).resolve().parents[3]


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str

    @property
    def lines(self) -> list[str]:
        return self.out.splitlines()


Run = Callable[..., Result]


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Run:
    """``run("validate", "-f", path, stdin="...")`` -> Result(code, out, err)."""

    def invoke(*argv: str, stdin: str | None = None) -> Result:
        if stdin is not None:
            monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        code = main(list(argv))
        captured = capsys.readouterr()
        assert "Traceback" not in captured.err
        return Result(code, captured.out, captured.err)

    return invoke


@pytest.fixture
def repo() -> Path:
    return REPO


@dataclass(frozen=True)
class LoopbackCert:
    """A self-signed serving certificate for 127.0.0.1 (it is its own CA)."""

    cert: Path
    key: Path
    pem: bytes


@pytest.fixture
def loopback_cert(tmp_path: Path) -> LoopbackCert:
    """A fake API server's certificate, written to tmp_path/srv.crt and srv.key."""
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
    pem = cert.public_bytes(serialization.Encoding.PEM)
    (tmp_path / "srv.crt").write_bytes(pem)
    (tmp_path / "srv.key").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return LoopbackCert(tmp_path / "srv.crt", tmp_path / "srv.key", pem)


class Routes:
    """An HTTPS API server answering by (method, path), or through `handle` (a stateful
    fake) when set; every request recorded."""

    def __init__(self, cert: LoopbackCert) -> None:
        self.answers: dict[tuple[str, str], tuple[int, Any]] = {}
        self.handle: Callable[[str, str, Any], tuple[int, Any]] | None = None
        self.requests: list[tuple[str, str, dict[str, list[str]], Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                url = urlsplit(self.path)
                body = json.loads(raw) if raw else None
                outer.requests.append((self.command, url.path, parse_qs(url.query), body))
                if outer.handle is not None:
                    status, answer = outer.handle(self.command, url.path, body)
                else:
                    status, answer = outer.answers.get((self.command, url.path), (200, {}))
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_PUT = do_GET = do_DELETE = do_POST = do_PATCH = _serve  # noqa: N815

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(str(cert.cert), str(cert.key))
        self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        self.ca = cert.pem
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def kubeconfig(self, tmp_path: Path) -> str:
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "main",
            "clusters": [
                {
                    "name": "c",
                    "cluster": {
                        "server": f"https://127.0.0.1:{self.port}",
                        "certificate-authority-data": base64.b64encode(self.ca).decode(),
                    },
                }
            ],
            "users": [{"name": "u", "user": {"token": "t"}}],
            "contexts": [{"name": "main", "context": {"cluster": "c", "user": "u", "namespace": "team-a"}}],
        }  # fmt: skip
        path = tmp_path / "kubeconfig"
        path.write_text(yaml.safe_dump(config))
        return str(path)


@pytest.fixture
def api(loopback_cert: LoopbackCert) -> Iterator[Routes]:
    """A fake API server on loopback (see Routes), shut down after the test."""
    routes = Routes(loopback_cert)
    yield routes
    routes.httpd.shutdown()
