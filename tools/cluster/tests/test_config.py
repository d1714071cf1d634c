"""Cluster settings come from KV_CLUSTER_* variables; bad values are named."""

from pathlib import Path

import pytest
from kv_cluster.config import DEFAULT_PORT_BASE, ClusterConfig, ConfigError


def test_defaults_live_under_the_users_state_and_cache_dirs() -> None:
    config = ClusterConfig.from_env({"HOME": "/home/dev"})
    assert config.state_dir == Path("/home/dev/.local/state/kubevirt-py/cluster")
    assert config.cache_dir == Path("/home/dev/.cache/kubevirt-py")
    assert config.ports.base == DEFAULT_PORT_BASE
    assert config.kubernetes_service_ip == "10.96.0.1"


def test_a_second_cluster_gets_its_own_dir_and_ports() -> None:
    config = ClusterConfig.from_env(
        {"HOME": "/h", "KV_CLUSTER_STATE_DIR": "/tmp/other", "KV_CLUSTER_PORT_BASE": "27000"}
    )
    assert config.state_dir == Path("/tmp/other")
    ports = config.ports
    used = [ports.etcd_client, ports.etcd_peer, ports.apiserver]
    used += [ports.controller_manager, ports.scheduler, ports.node(0), ports.node(9)]
    assert used == [27000, 27001, 27002, 27003, 27004, 27010, 27019]


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"KV_CLUSTER_PORT_BASE": "lots"}, "KV_CLUSTER_PORT_BASE"),
        ({"KV_CLUSTER_PORT_BASE": "80"}, "KV_CLUSTER_PORT_BASE"),
        ({"KV_CLUSTER_STATE_DIR": "relative/dir"}, "KV_CLUSTER_STATE_DIR"),
        ({"KV_CLUSTER_STATE_DIR": "/tmp/a/../b"}, "KV_CLUSTER_STATE_DIR"),
        ({"KV_CLUSTER_CACHE_DIR": "/tmp/../etc"}, "KV_CLUSTER_CACHE_DIR"),
        ({"KV_CLUSTER_HOST_IP": "127.0.0.2"}, "KV_CLUSTER_HOST_IP"),
        ({"KV_CLUSTER_HOST_IP": "not-an-ip"}, "KV_CLUSTER_HOST_IP"),
        ({"KV_CLUSTER_SERVICE_CIDR": "8.8.8.0/24"}, "KV_CLUSTER_SERVICE_CIDR"),
        ({"KV_CLUSTER_HOST_IP": "10.96.0.5"}, "KV_CLUSTER_HOST_IP"),
    ],
)
def test_bad_values_name_the_variable(env: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        ClusterConfig.from_env({"HOME": "/h", **env})


def test_saved_config_round_trips(tmp_path: Path) -> None:
    config = ClusterConfig.from_env({"HOME": "/h", "KV_CLUSTER_PORT_BASE": "30000"})
    config.save(tmp_path / "config.json")
    assert ClusterConfig.load(tmp_path / "config.json") == config


def test_a_malformed_saved_config_is_refused(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{"ports": "x"}')
    with pytest.raises(ConfigError, match="malformed"):
        ClusterConfig.load(tmp_path / "config.json")
