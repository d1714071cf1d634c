"""The cluster's registry: its config, where it stores, how nodes trust it, when it runs."""

from __future__ import annotations

import os
import tempfile
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from kv_cluster.cluster import Cluster
from kv_cluster.components import ClusterContext
from kv_cluster.config import ClusterConfig, Ports
from kv_cluster.containerd import (
    NO_REGISTRY_PROXY,
    Containerd,
    registry_hosts,
    render_containerd_config,
    render_hosts_toml,
)
from kv_cluster.crds import KubevirtCrds
from kv_cluster.health import Health
from kv_cluster.kubectl import Kubectl
from kv_cluster.node import NodeSet
from kv_cluster.nodes import node_specs, write_node_count
from kv_cluster.pki import CertPaths
from kv_cluster.plan import order
from kv_cluster.process import ProcessRecord
from kv_cluster.registry import registry_storage, render_registry_config
from kv_images import RegistryEndpoint

HOST_IP = "10.95.0.43"


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A state dir short enough for the nodes' socket paths (pytest's tmp_path is not)."""
    with tempfile.TemporaryDirectory(prefix="kvreg", dir="/tmp") as name:
        yield Path(name)


def _config(root: Path) -> ClusterConfig:
    return ClusterConfig(
        state_dir=root / "s", cache_dir=root / "cache", ports=Ports(28300), host_ip=HOST_IP
    )


def _ctx(root: Path, nodes: int) -> ClusterContext:
    """The context `up` would use for a new cluster of `nodes` nodes (its PKI made)."""
    cluster = Cluster(_config(root))
    cluster.layout.create()
    write_node_count(cluster.layout, nodes)
    return cluster._context()


def test_the_registry_serves_https_on_the_cluster_address_from_its_storage(
    tmp_path: Path,
) -> None:
    config = _config(tmp_path)
    serving = CertPaths(tmp_path / "registry.crt", tmp_path / "registry.key")
    body = yaml.safe_load(render_registry_config(config, serving, tmp_path / "store"))
    assert body["http"]["addr"] == f"{HOST_IP}:{28300 + 5}"
    assert body["http"]["tls"] == {
        "certificate": str(serving.cert),
        "key": str(serving.key),
        "minimumtls": "tls1.2",
    }
    assert body["storage"]["filesystem"] == {"rootdirectory": str(tmp_path / "store")}
    # Not a pull-through cache: it never fetches from another registry.
    assert "proxy" not in body


def test_storage_outlives_the_state_dir_and_is_one_per_cluster(tmp_path: Path) -> None:
    one = _config(tmp_path)
    other = ClusterConfig(
        state_dir=tmp_path / "other" / "s", cache_dir=one.cache_dir, ports=Ports(28400)
    )
    assert registry_storage(one).is_relative_to(one.cache_dir)
    assert not registry_storage(one).is_relative_to(one.state_dir)
    assert registry_storage(one) != registry_storage(other)
    assert registry_storage(one) == registry_storage(_config(tmp_path))


def test_hosts_toml_sends_pulls_to_the_registry_and_nowhere_else(tmp_path: Path) -> None:
    endpoint = RegistryEndpoint(f"{HOST_IP}:28305", ca=tmp_path / "ca.crt")
    parsed = tomllib.loads(render_hosts_toml(endpoint))
    url = f"https://{HOST_IP}:28305"
    # containerd falls back to `server` after the hosts; unset, that is registry-1.docker.io.
    assert parsed["server"] == url
    assert list(parsed["host"]) == [url]
    # containerd 1.6 refuses a hosts.toml without a [host] table and then uses the default
    # upstream host: the table must be there.
    for entry in (parsed, parsed["host"][url]):
        assert entry["capabilities"] == ["pull", "resolve"]
        assert entry["ca"] == str(tmp_path / "ca.crt")


def test_nodes_trust_the_registry_for_docker_io_upstream_names_and_its_own(
    tmp_path: Path,
) -> None:
    endpoint = RegistryEndpoint(f"{HOST_IP}:28305", ca=tmp_path / "ca.crt")
    assert set(registry_hosts(endpoint)) == {"docker.io", "registry:5000", f"{HOST_IP}:28305"}


def test_containerd_reads_certs_d_and_reaches_only_the_registry_directly(
    short_dir: Path,
) -> None:
    ctx = _ctx(short_dir, 1)
    [node] = node_specs(ctx.config, ctx.layout, 1)
    text = render_containerd_config(node, "docker.io/kubevirt-py/pause:abc")
    registry = tomllib.loads(text)["plugins"]["io.containerd.cri.v1.images"]["registry"]
    assert registry == {"config_path": str(node.containerd_dir / "certs.d")}
    argv = Containerd(ctx, node, "docker.io/kubevirt-py/pause:abc").argv()
    assert f"HTTPS_PROXY={NO_REGISTRY_PROXY}" in argv
    assert f"NO_PROXY={HOST_IP}" in argv


def test_containerd_writes_the_hosts_files_it_reads(short_dir: Path) -> None:
    ctx = _ctx(short_dir, 1)
    [node] = node_specs(ctx.config, ctx.layout, 1)
    containerd = Containerd(ctx, node, "docker.io/kubevirt-py/pause:abc")
    containerd.write_hosts()
    written = (containerd.certs_dir / "docker.io" / "hosts.toml").read_text()
    assert str(ctx.credentials.ca.paths.cert) in written
    assert f"https://{HOST_IP}:{ctx.config.ports.registry}" in written


def _plan_names(ctx: ClusterContext, nodes: int) -> list[str]:
    crds = KubevirtCrds(Kubectl(ctx.layout.admin_kubeconfig), None)
    steps = Cluster._plan(ctx, NodeSet(ctx, nodes), crds, build=False)
    return [s.name for s in order(steps)]


def test_the_registry_serves_before_any_node_or_kubevirt_pod_needs_it(
    short_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("KV_CLUSTER_VIRT_API", "KV_CLUSTER_VIRT_NODE", "KV_CLUSTER_REGISTRY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("KV_CLUSTER_KUBEVIRT", "pods")
    names = _plan_names(_ctx(short_dir, 2), 2)
    assert names.count("registry") == 1
    for later in ("containerd-kv-node-0", "containerd-kv-node-1", "kubevirt"):
        assert names.index("registry") < names.index(later)


def test_a_cluster_without_nodes_runs_no_registry_unless_asked(
    short_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KV_CLUSTER_VIRT_API", "0")
    monkeypatch.setenv("KV_CLUSTER_VIRT_NODE", "0")
    monkeypatch.delenv("KV_CLUSTER_REGISTRY", raising=False)
    ctx = _ctx(short_dir, 0)
    assert "registry" not in _plan_names(ctx, 0)
    monkeypatch.setenv("KV_CLUSTER_REGISTRY", "1")
    assert "registry" in _plan_names(ctx, 0)


def _running_containerd(
    short_dir: Path, monkeypatch: pytest.MonkeyPatch, *, config: str, argv: tuple[str, ...]
) -> tuple[Containerd, list[str]]:
    """A Containerd whose record is this test process (alive), with `config` on disk;
    stopping and starting are recorded instead of done."""
    ctx = _ctx(short_dir, 1)
    [node] = node_specs(ctx.config, ctx.layout, 1)
    containerd = Containerd(ctx, node, "docker.io/kubevirt-py/pause:abc")
    record = ProcessRecord.from_pid(containerd.name, os.getpid(), argv)
    assert record is not None
    record.save(ctx.layout.pidfile(containerd.name))
    containerd.config_path.parent.mkdir(parents=True, exist_ok=True)
    containerd.config_path.write_text(config)
    calls: list[str] = []
    monkeypatch.setattr("kv_cluster.containerd.stop_process", lambda r: calls.append("stop"))
    monkeypatch.setattr(Containerd, "start", lambda self: calls.append("start"))
    monkeypatch.setattr(Containerd, "health", lambda self: Health(True, "serving"))
    return containerd, calls


def test_a_running_containerd_with_an_older_config_is_restarted_with_the_new_one(
    short_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cluster upgraded in place: its nodes' containerd had `config_path = ""`."""
    containerd, calls = _running_containerd(
        short_dir, monkeypatch, config='config_path = ""\n', argv=("/usr/bin/containerd",)
    )
    assert containerd.ensure() == "reconfigured"
    assert calls == ["stop", "start"]


def test_a_running_containerd_with_the_current_config_is_left_alone(
    short_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    probe, _ = _running_containerd(short_dir, monkeypatch, config="", argv=())
    rendered = render_containerd_config(probe.node, probe.sandbox_image)
    containerd, calls = _running_containerd(
        short_dir, monkeypatch, config=rendered, argv=tuple(probe.argv())
    )
    assert containerd.ensure() == "running"
    assert calls == []
