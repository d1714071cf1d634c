"""What the handler's process takes for migrations: its address, the CR's settings, its TLS."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest
from virt_handler.app import _migration_tls, build_parser, cluster_migrations

if TYPE_CHECKING:
    from conftest import Authority


def test_the_migration_address_comes_from_the_pod_ip(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_IP", "10.244.1.7")
    assert build_parser().parse_args(["--node-name=n"]).pod_ip_address == "10.244.1.7"
    flagged = build_parser().parse_args(["--node-name=n", "--pod-ip-address=10.0.0.9"])
    assert flagged.pod_ip_address == "10.0.0.9"


def test_the_kubevirt_crs_migrations_settings() -> None:
    cr = {"spec": {"configuration": {"migrations": {"disableTLS": True, "progressTimeout": 9}}}}
    migrations = cluster_migrations([cr])
    assert (migrations.disable_tls, migrations.progress_timeout) == (True, 9)
    assert migrations.completion_timeout_per_gi_b == 150  # upstream's default under it
    assert cluster_migrations([]).disable_tls is None


def test_migrations_use_the_relays_certificate_both_ways(
    authority: Callable[[str], Authority],
) -> None:
    ca = authority("cluster-ca")
    cert, key = ca.issue("virt-handler", server=True)
    args = build_parser().parse_args(
        ["--node-name=n", f"--tls-cert={cert}", f"--tls-key={key}", f"--client-ca={ca.ca}"]
    )
    tls = _migration_tls(args)
    assert tls.server is not None
    assert tls.client is not None
    assert tls.client.check_hostname is False  # handlers' certificates name no pod IP
    no_tls = _migration_tls(build_parser().parse_args(["--node-name=n"]))
    assert (no_tls.server, no_tls.client) == (None, None)
