"""The install's certificates: one CA (`kubevirt-ca`) and the leaves it signs, rotated
before expiry as upstream's `certificateRotateStrategy.selfSigned` says.

Pure: PEM in, PEM out, time given. Upstream's defaults: the CA lives 7 days, a leaf 1 day,
each is renewed when less than `renewBefore` (default a fifth of its duration) is left.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from kubevirt_api.durations import parse_duration

__all__ = [
    "CA_NAME",
    "KeyPair",
    "LeafSpec",
    "RotationPolicy",
    "issue_ca",
    "issue_leaf",
    "leaf_specs",
    "needs_renewal",
    "signed_by",
]

CA_NAME = "kubevirt-ca"
_DAY = 86400.0


@dataclass(frozen=True, slots=True)
class KeyPair:
    """A PEM certificate and its PEM private key."""

    cert: bytes
    key: bytes


@dataclass(frozen=True, slots=True)
class RotationPolicy:
    """Lifetimes and renewal margins in seconds (spec.certificateRotateStrategy.selfSigned)."""

    ca_duration: float = 7 * _DAY
    ca_renew_before: float = 7 * _DAY * 0.2
    cert_duration: float = _DAY
    cert_renew_before: float = _DAY * 0.2

    @classmethod
    def from_kubevirt_spec(cls, spec: Mapping[str, Any]) -> RotationPolicy:
        """Upstream's precedence: the deprecated *Interval fields, then ca/server, then defaults."""
        strategy = spec.get("certificateRotateStrategy")
        self_signed = strategy.get("selfSigned") if isinstance(strategy, Mapping) else None
        if not isinstance(self_signed, Mapping):
            return cls()

        def duration(deprecated: str, section: str, key: str) -> float | None:
            value = self_signed.get(deprecated)
            if value is None:
                part = self_signed.get(section)
                value = part.get(key) if isinstance(part, Mapping) else None
            if not isinstance(value, str):
                return None
            try:
                return parse_duration(value)
            except ValueError:
                return None

        ca = duration("caRotateInterval", "ca", "duration") or 7 * _DAY
        cert = duration("certRotateInterval", "server", "duration") or _DAY
        ca_before = duration("caOverlapInterval", "ca", "renewBefore") or ca * 0.2
        cert_before = duration("", "server", "renewBefore") or cert * 0.2
        return cls(ca, ca_before, cert, cert_before)


@dataclass(frozen=True, slots=True)
class LeafSpec:
    """One leaf certificate's Secret and identity."""

    secret: str
    common_name: str
    dns_names: tuple[str, ...] = ()
    server: bool = True
    client: bool = False
    #: Also put the CA into the Secret as `ca.crt` (for a client that verifies its peer).
    with_ca: bool = False


def leaf_specs(namespace: str) -> tuple[LeafSpec, ...]:
    """The Secrets the components mount (names from their manifests and upstream's)."""

    def service(name: str) -> tuple[str, ...]:
        return (
            name,
            f"{name}.{namespace}",
            f"{name}.{namespace}.svc",
            f"{name}.{namespace}.svc.cluster.local",
        )

    return (
        LeafSpec("kubevirt-virt-api-certs", f"virt-api.{namespace}.svc", service("virt-api")),
        # Handlers are each other's clients too (migration's mutual TLS).
        LeafSpec("kubevirt-virt-handler-certs", "virt-handler", client=True),
        LeafSpec(
            "kubevirt-virt-api-handler-client",
            "virt-api",
            server=False,
            client=True,
            with_ca=True,
        ),
        LeafSpec(
            "kubevirt-operator-certs",
            f"kubevirt-operator-webhook.{namespace}.svc",
            service("kubevirt-operator-webhook"),
        ),
    )


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def issue_ca(common_name: str, now: datetime.datetime, lifetime: float) -> KeyPair:
    """A self-signed CA valid from a minute before `now` for `lifetime` seconds."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = _name(common_name)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(seconds=lifetime))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def issue_leaf(ca: KeyPair, spec: LeafSpec, now: datetime.datetime, lifetime: float) -> KeyPair:
    """A leaf for `spec`, signed by `ca`, never outliving it."""
    ca_cert = x509.load_pem_x509_certificate(ca.cert)
    ca_key = serialization.load_pem_private_key(ca.key, password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError("the CA key is not an EC key")
    key = ec.generate_private_key(ec.SECP256R1())
    not_after = min(now + datetime.timedelta(seconds=lifetime), ca_cert.not_valid_after_utc)
    usages = [ExtendedKeyUsageOID.SERVER_AUTH] if spec.server else []
    usages += [ExtendedKeyUsageOID.CLIENT_AUTH] if spec.client else []
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(spec.common_name))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    )
    names: Sequence[str] = spec.dns_names or ((spec.common_name,) if spec.server else ())
    if names:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), critical=False
        )
    cert = builder.sign(ca_key, hashes.SHA256())
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def needs_renewal(cert_pem: bytes, now: datetime.datetime, renew_before: float) -> bool:
    """True when the certificate is unreadable or has less than `renew_before` seconds left."""
    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
    except ValueError:
        return True
    left = (cert.not_valid_after_utc - now).total_seconds()
    return left < renew_before


def signed_by(cert_pem: bytes, ca_pem: bytes) -> bool:
    """True when `ca_pem` signed `cert_pem`."""
    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
        ca = x509.load_pem_x509_certificate(ca_pem)
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True
