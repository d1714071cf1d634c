"""Helpers for virtctl's unit tests: run main() and capture what the user sees."""

from __future__ import annotations

import datetime
import io
import ipaddress
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
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
