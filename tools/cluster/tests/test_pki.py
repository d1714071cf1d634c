"""Certificates are issued once, chain to their CA, and are reissued when names change."""

import ipaddress
import stat
from pathlib import Path

from cryptography import x509
from kv_cluster.pki import CertificateAuthority, service_account_keys


def _load(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_a_serving_cert_chains_to_its_ca_and_carries_the_names(tmp_path: Path) -> None:
    ca = CertificateAuthority.load_or_create(tmp_path, "ca", "test-ca")
    paths = ca.issue(
        tmp_path, "srv", "server", server=True, dns_names=["localhost"], ip_addresses=["10.95.0.1"]
    )
    cert = _load(paths.cert)
    cert.verify_directly_issued_by(_load(ca.paths.cert))
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["localhost"]
    assert san.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("10.95.0.1")]
    assert stat.S_IMODE(paths.key.stat().st_mode) == 0o600


def test_issuing_again_keeps_the_same_certificate(tmp_path: Path) -> None:
    ca = CertificateAuthority.load_or_create(tmp_path, "ca", "test-ca")
    first = ca.issue(tmp_path, "client", "alice", organizations=["devs"], client=True)
    before = first.cert.read_bytes()
    again = CertificateAuthority.load_or_create(tmp_path, "ca", "test-ca")
    again.issue(tmp_path, "client", "alice", organizations=["devs"], client=True)
    assert first.cert.read_bytes() == before


def test_changed_names_or_another_ca_reissue(tmp_path: Path) -> None:
    ca = CertificateAuthority.load_or_create(tmp_path, "ca", "test-ca")
    paths = ca.issue(tmp_path, "srv", "server", server=True, ip_addresses=["127.0.0.1"])
    before = paths.cert.read_bytes()
    ca.issue(tmp_path, "srv", "server", server=True, ip_addresses=["127.0.0.1", "10.95.0.1"])
    assert paths.cert.read_bytes() != before
    other = CertificateAuthority.load_or_create(tmp_path / "o", "ca", "other-ca")
    other.issue(tmp_path, "srv", "server", server=True, ip_addresses=["127.0.0.1", "10.95.0.1"])
    _load(paths.cert).verify_directly_issued_by(_load(other.paths.cert))


def test_service_account_keys_are_made_once(tmp_path: Path) -> None:
    first = service_account_keys(tmp_path)
    key = first.key.read_bytes()
    assert service_account_keys(tmp_path).key.read_bytes() == key
    assert b"PUBLIC KEY" in first.cert.read_bytes()


def test_a_key_left_half_written_with_a_wide_mode_is_rewritten_private(tmp_path: Path) -> None:
    ca = CertificateAuthority.load_or_create(tmp_path, "ca", "test-ca")
    leftover = tmp_path / "srv.key.tmp"  # an interrupted run, under a lax umask
    leftover.write_bytes(b"partial")
    leftover.chmod(0o644)
    paths = ca.issue(tmp_path, "srv", "server", server=True, ip_addresses=["127.0.0.1"])
    assert stat.S_IMODE(paths.key.stat().st_mode) == 0o600
    assert not leftover.exists()
