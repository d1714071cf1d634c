"""Certificate authorities and the certificates and keys a cluster needs.

Issuing is idempotent: a certificate already on disk is kept while it was signed by the
same CA, has the requested subject and names, and is not close to expiry. A node module
issues kubelet client certs (CN system:node:<name>, O system:nodes) and serving certs
with the same `CertificateAuthority.issue`.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["CertPaths", "CertificateAuthority", "service_account_keys"]

_CA_LIFETIME = datetime.timedelta(days=3650)
_LEAF_LIFETIME = datetime.timedelta(days=365)
_RENEW_BEFORE = datetime.timedelta(days=30)


@dataclass(frozen=True)
class CertPaths:
    """A PEM certificate and its PEM private key."""

    cert: Path
    key: Path


def _write_private(path: Path, data: bytes) -> None:
    # Created 0600 from the start so a key is never readable by others, even briefly.
    tmp = path.with_name(path.name + ".tmp")
    # A .tmp left by an interrupted run keeps its old mode under O_CREAT: start afresh.
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    tmp.replace(path)


def _write_public(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _name(common_name: str, organizations: Iterable[str] = ()) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in organizations]
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attrs)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class CertificateAuthority:
    """A self-signed CA kept as `<dir>/<name>.crt` and `<dir>/<name>.key`."""

    def __init__(
        self, paths: CertPaths, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey
    ) -> None:
        self.paths = paths
        self.certificate = cert
        self._key = key

    @property
    def cert_pem(self) -> bytes:
        """The CA certificate in PEM (for caBundle fields and kubeconfigs)."""
        return self.certificate.public_bytes(serialization.Encoding.PEM)

    @classmethod
    def load_or_create(cls, directory: Path, name: str, common_name: str) -> CertificateAuthority:
        """Load the CA `name` from `directory`, creating it on first use."""
        paths = CertPaths(directory / f"{name}.crt", directory / f"{name}.key")
        if paths.cert.exists() and paths.key.exists():
            cert = x509.load_pem_x509_certificate(paths.cert.read_bytes())
            key = serialization.load_pem_private_key(paths.key.read_bytes(), password=None)
            if not isinstance(key, ec.EllipticCurvePrivateKey):
                raise ValueError(f"{paths.key} is not an EC private key")
            return cls(paths, cert, key)
        key = _new_key()
        subject = _name(common_name)
        now = _now()
        cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _CA_LIFETIME)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
            .sign(key, hashes.SHA256())
        )
        directory.mkdir(parents=True, exist_ok=True)
        _write_private(paths.key, _key_pem(key))
        _write_public(paths.cert, cert.public_bytes(serialization.Encoding.PEM))
        return cls(paths, cert, key)

    def issue(
        self,
        directory: Path,
        name: str,
        common_name: str,
        *,
        organizations: Iterable[str] = (),
        server: bool = False,
        client: bool = False,
        dns_names: Iterable[str] = (),
        ip_addresses: Iterable[str] = (),
    ) -> CertPaths:
        """Return `<directory>/<name>.crt|.key`, (re)issuing it only when it does not match."""
        if not (server or client):
            raise ValueError("a certificate must be for server use, client use, or both")
        orgs = tuple(organizations)
        dns = tuple(dns_names)
        ips = tuple(ipaddress.ip_address(ip) for ip in ip_addresses)
        subject = _name(common_name, orgs)
        paths = CertPaths(directory / f"{name}.crt", directory / f"{name}.key")
        usages = ([ExtendedKeyUsageOID.SERVER_AUTH] if server else []) + (
            [ExtendedKeyUsageOID.CLIENT_AUTH] if client else []
        )
        if self._still_good(paths, subject, dns, ips, usages):
            return paths
        key = _new_key()
        now = _now()
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(self.certificate.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _LEAF_LIFETIME)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=False,
                    crl_sign=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()), False
            )
        )
        if dns or ips:
            sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
            sans += [x509.IPAddress(ip) for ip in ips]
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        directory.mkdir(parents=True, exist_ok=True)
        _write_private(paths.key, _key_pem(key))
        _write_public(paths.cert, cert.public_bytes(serialization.Encoding.PEM))
        return paths

    def _still_good(
        self,
        paths: CertPaths,
        subject: x509.Name,
        dns: tuple[str, ...],
        ips: tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, ...],
        usages: list[x509.ObjectIdentifier],
    ) -> bool:
        if not (paths.cert.exists() and paths.key.exists()):
            return False
        try:
            cert = x509.load_pem_x509_certificate(paths.cert.read_bytes())
        except ValueError:
            return False
        if cert.issuer != self.certificate.subject or cert.subject != subject:
            return False
        try:
            cert.verify_directly_issued_by(self.certificate)
        except (InvalidSignature, ValueError, TypeError):
            return False
        if cert.not_valid_after_utc - _now() < _RENEW_BEFORE:
            return False
        try:
            have_usages = set(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)
        except x509.ExtensionNotFound:
            have_usages = set()
        if have_usages != set(usages):
            return False  # e.g. a server certificate that now also acts as a client
        try:
            san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
            have_dns = set(san.get_values_for_type(x509.DNSName))
            have_ips = set(san.get_values_for_type(x509.IPAddress))
        except x509.ExtensionNotFound:
            have_dns, have_ips = set(), set()
        return have_dns == set(dns) and have_ips == set(ips)


def service_account_keys(directory: Path) -> CertPaths:
    """The RSA key pair that signs service-account tokens (`sa.key`, public half `sa.pub`)."""
    paths = CertPaths(directory / "sa.pub", directory / "sa.key")
    if paths.cert.exists() and paths.key.exists():
        return paths
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    directory.mkdir(parents=True, exist_ok=True)
    _write_private(paths.key, _key_pem(key))
    _write_public(
        paths.cert,
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        ),
    )
    return paths
