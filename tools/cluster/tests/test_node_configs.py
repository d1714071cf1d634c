"""The node's containerd, kubelet and CNI settings carry what this host needs."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest
from kv_cluster.cni import render_cni_conflist
from kv_cluster.config import ClusterConfig, ConfigError, Ports
from kv_cluster.containerd import render_containerd_config
from kv_cluster.layout import StateLayout
from kv_cluster.nodes import node_specs


def _config(tmp_path: Path) -> ClusterConfig:
    # Only paths are computed, nothing is created: a short state dir keeps sockets valid.
    return ClusterConfig(state_dir=Path("/tmp/kvn-state"), cache_dir=tmp_path, ports=Ports(26400))


def test_nodes_get_distinct_subnets_bridges_and_dirs(tmp_path: Path) -> None:
    config = _config(tmp_path)
    a, b = node_specs(config, StateLayout(config.state_dir), 2)
    assert (a.pod_subnet, b.pod_subnet) == ("10.244.0.0/24", "10.244.1.0/24")
    assert a.gateway == "10.244.0.1"
    assert a.bridge != b.bridge
    assert len(a.bridge) <= 15
    assert a.containerd_socket != b.containerd_socket


def test_node_count_and_socket_length_are_checked(tmp_path: Path) -> None:
    config = _config(tmp_path)
    with pytest.raises(ConfigError, match="--nodes"):
        node_specs(config, StateLayout(config.state_dir), 9)
    deep = ClusterConfig(state_dir=tmp_path / ("d" * 120), cache_dir=tmp_path, ports=Ports(26400))
    with pytest.raises(ConfigError, match="too long"):
        node_specs(deep, StateLayout(deep.state_dir), 1)


def test_containerd_config_has_this_hosts_settings(tmp_path: Path) -> None:
    config = _config(tmp_path)
    [node] = node_specs(config, StateLayout(config.state_dir), 1)
    config_toml = tomllib.loads(render_containerd_config(node, "docker.io/kubevirt-py/pause:abc"))
    # Version 3: the layout containerd 2.x reads without migrating it.
    assert config_toml["version"] == 3
    plugins = config_toml["plugins"]
    runtime = plugins["io.containerd.cri.v1.runtime"]
    assert runtime["restrict_oom_score_adj"] is True
    assert runtime["containerd"]["runtimes"]["runc"]["options"]["SystemdCgroup"] is False
    assert runtime["cni"]["conf_dir"] == str(node.cni_dir / "net.d")
    images = plugins["io.containerd.cri.v1.images"]
    assert images["pinned_images"]["sandbox"] == "docker.io/kubevirt-py/pause:abc"
    assert images["registry"]["config_path"] == str(node.containerd_dir / "certs.d")
    assert config_toml["grpc"]["address"] == str(node.containerd_socket)


def test_cni_gives_pods_no_default_route_and_no_masquerade(tmp_path: Path) -> None:
    config = _config(tmp_path)
    [node] = node_specs(config, StateLayout(config.state_dir), 1)
    bridge = render_cni_conflist(config, node)["plugins"][0]
    assert bridge["ipMasq"] is False
    routes = [r["dst"] for r in bridge["ipam"]["routes"]]
    assert "0.0.0.0/0" not in routes
    assert set(routes) == {config.pod_cidr, config.service_cidr, f"{config.host_ip}/32"}
    assert bridge["ipam"]["ranges"] == [[{"subnet": "10.244.0.0/24", "gateway": "10.244.0.1"}]]


def test_kubelet_config_nests_cgroups_and_accepts_cgroup_v1(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from kv_cluster.kubelet import render_kubelet_config

    config = _config(tmp_path)
    layout = StateLayout(config.state_dir)
    [node] = node_specs(config, layout, 1)
    ca = SimpleNamespace(paths=SimpleNamespace(cert=tmp_path / "ca.crt"))
    ctx: Any = SimpleNamespace(config=config, layout=layout, credentials=SimpleNamespace(ca=ca))
    rendered = render_kubelet_config(
        ctx, node, "/process_api/x/kubevirt-py-26400/kv-node-0", (tmp_path / "c", tmp_path / "k")
    )
    assert rendered["cgroupDriver"] == "cgroupfs"
    assert rendered["failCgroupV1"] is False
    assert rendered["cgroupRoot"] == "/process_api/x/kubevirt-py-26400/kv-node-0"
    assert rendered["containerRuntimeEndpoint"] == f"unix://{node.containerd_socket}"
    assert rendered["clusterDNS"] == [config.host_ip]
    assert rendered["oomScoreAdj"] == 0
    assert rendered["readOnlyPort"] == 0
    assert rendered["authentication"]["anonymous"]["enabled"] is False
