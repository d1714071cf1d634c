"""Fixtures for service_kit's unit tests: a throwaway PKI and a blocking-call guard."""

from __future__ import annotations

import datetime as dt
import ipaddress
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import structlog
from blockbuster import blockbuster_ctx
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass
class Pki:
    """A CA in ``directory`` that issues leaf certificates as PEM files."""

    directory: Path
    ca_key: ec.EllipticCurvePrivateKey
    ca_cert: x509.Certificate

    @property
    def ca_path(self) -> Path:
        return self.directory / "ca.crt"

    def issue(
        self, name: str, *, client: bool = False, serial: int | None = None
    ) -> tuple[Path, Path]:
        """Write ``name``.crt and ``name``.key (overwriting) and return their paths."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        usage = ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(self.ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(serial if serial is not None else x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
        if not client:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
                ),
                critical=False,
            )
        cert = builder.sign(self.ca_key, hashes.SHA256())
        cert_path, key_path = self.directory / f"{name}.crt", self.directory / f"{name}.key"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_path.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        return cert_path, key_path


def make_pki(directory: Path) -> Pki:
    """A fresh self-signed CA writing its files into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"test-ca-{directory.name}")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    (directory / "ca.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return Pki(directory, key, cert)


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    """The cluster's CA."""
    return make_pki(tmp_path / "pki")


@pytest.fixture
def stranger_pki(tmp_path: Path) -> Pki:
    """A CA that has nothing to do with the cluster's."""
    return make_pki(tmp_path / "stranger")


@pytest.fixture
def no_blocking() -> Iterator[None]:
    """Fail the test when a blocking call runs on the event loop thread."""
    with blockbuster_ctx():
        yield


@pytest.fixture(autouse=True)
def _reset_structlog() -> Iterator[None]:
    """Each test starts from structlog's defaults and an empty context."""
    yield
    structlog.reset_defaults()
    structlog.contextvars.clear_contextvars()
