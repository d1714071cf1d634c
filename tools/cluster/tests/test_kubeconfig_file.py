"""A written kubeconfig embeds its certificates and is private to its owner."""

import stat
from pathlib import Path

import yaml
from kv_cluster.kubeconfig import write_kubeconfig
from kv_cluster.pki import CertificateAuthority


def test_the_kubeconfig_is_0600_even_over_a_wide_leftover(tmp_path: Path) -> None:
    ca = CertificateAuthority.load_or_create(tmp_path, "ca", "test-ca")
    client = ca.issue(tmp_path, "admin", "admin", organizations=["system:masters"], client=True)
    target = tmp_path / "admin.kubeconfig"
    leftover = tmp_path / "admin.kubeconfig.tmp"  # an interrupted run, under a lax umask
    leftover.write_text("partial")
    leftover.chmod(0o644)
    write_kubeconfig(
        target,
        cluster="kv",
        server="https://127.0.0.1:6443",
        ca=ca.paths.cert,
        user="admin",
        client=client,
    )
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    doc = yaml.safe_load(target.read_text())
    assert doc["current-context"] == "admin@kv"
    assert doc["users"][0]["user"]["client-key-data"]
