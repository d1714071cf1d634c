"""The exporter's TLS material: one self-signed server certificate per exporter pod.

Upstream signs exporter certificates with a cluster-wide export CA that virt-operator
rotates. Here each exporter pod gets its own self-signed certificate for its Service's
DNS names; the certificate is its own trust anchor and is published as
status.links.internal.cert, so a client trusts exactly that exporter and nothing else,
and no CA key lives in virt-controller.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["ServerCert", "self_signed"]


#: ub-common-name (RFC 5280): a longer CN is refused by the certificate builder.
_MAX_COMMON_NAME = 64


@dataclass(frozen=True, slots=True)
class ServerCert:
    """PEM certificate and PKCS#8 key."""

    cert_pem: str
    key_pem: str


def self_signed(names: list[str], now: dt.datetime, lifetime: dt.timedelta) -> ServerCert:
    """A P-256 server certificate for DNS `names` (all in its subjectAltName; the first that
    fits X.509's 64 characters is the subject's CN, which clients do not check when a SAN
    is present), valid from a minute before `now` (clock skew) for `lifetime`."""
    if not names:
        raise ValueError("a server certificate needs at least one DNS name")
    key = ec.generate_private_key(ec.SECP256R1())
    common = next((n for n in names if len(n) <= _MAX_COMMON_NAME), names[0][:_MAX_COMMON_NAME])
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=1))
        .not_valid_after(now + lifetime)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), False)
        .sign(key, hashes.SHA256())
    )
    return ServerCert(
        cert.public_bytes(serialization.Encoding.PEM).decode(),
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode(),
    )
