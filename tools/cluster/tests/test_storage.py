"""The default StorageClass: local-path-provisioner's objects, paths, command line, plan."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from kv_cluster.cluster import Cluster
from kv_cluster.components import ClusterContext
from kv_cluster.config import ClusterConfig, Ports
from kv_cluster.crds import KubevirtCrds
from kv_cluster.kubectl import Kubectl
from kv_cluster.node import NodeSet
from kv_cluster.nodes import node_specs, write_node_count
from kv_cluster.plan import order
from kv_cluster.storage import (
    LocalPathProvisioner,
    local_path_build,
    local_path_root,
    render_block_volume,
    render_storage_objects,
    storage_components,
)

HOST_IP = "10.95.0.44"
HELPER = "docker.io/kubevirt-py/local-path-helper:0123456789abcdef"


@pytest.fixture
def short_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="kvsto", dir="/tmp") as name:
        yield Path(name)


def _ctx(root: Path, nodes: int) -> ClusterContext:
    config = ClusterConfig(
        state_dir=root / "s", cache_dir=root / "cache", ports=Ports(28400), host_ip=HOST_IP
    )
    cluster = Cluster(config)
    cluster.layout.create()
    write_node_count(cluster.layout, nodes)
    return cluster._context()


def _by_kind(items: list[dict[str, object]]) -> dict[str, dict[str, object]]:
    return {str(i["kind"]): i for i in items}


def test_local_path_is_the_default_storage_class_and_binds_where_the_pod_runs(
    short_dir: Path,
) -> None:
    ctx = _ctx(short_dir, 2)
    objects = _by_kind(render_storage_objects(node_specs(ctx.config, ctx.layout, 2), HELPER))
    storage_class = objects["StorageClass"]
    assert storage_class["metadata"] == {
        "name": "local-path",
        "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
    }
    assert storage_class["provisioner"] == "rancher.io/local-path"
    assert storage_class["volumeBindingMode"] == "WaitForFirstConsumer"
    assert storage_class["reclaimPolicy"] == "Delete"


def test_each_node_has_its_own_volume_root_and_no_default_path(short_dir: Path) -> None:
    ctx = _ctx(short_dir, 2)
    nodes = node_specs(ctx.config, ctx.layout, 2)
    data = _by_kind(render_storage_objects(nodes, HELPER))["ConfigMap"]["data"]
    assert isinstance(data, dict)
    config = json.loads(data["config.json"])
    # Nodes share this host's filesystem: one shared path would let a volume be seen
    # from a node it does not live on.
    assert config == {
        "nodePathMap": [
            {"node": "kv-node-0", "paths": [str(ctx.layout.root / "nodes/kv-node-0/local-path")]},
            {"node": "kv-node-1", "paths": [str(ctx.layout.root / "nodes/kv-node-1/local-path")]},
        ]
    }
    assert [str(local_path_root(n)) for n in nodes] == config["nodePathMap"][0]["paths"] + (
        config["nodePathMap"][1]["paths"]
    )
    helper = yaml.safe_load(data["helperPod.yaml"])
    assert helper["spec"]["containers"][0]["image"] == HELPER
    assert 'mkdir -m 0777 -p "$VOL_DIR"' in data["setup"]
    assert 'rm -rf "$VOL_DIR"' in data["teardown"]


def test_the_provisioner_talks_only_to_the_apiserver_with_its_helper_image(
    short_dir: Path,
) -> None:
    ctx = _ctx(short_dir, 1)
    provisioner = LocalPathProvisioner(ctx, node_specs(ctx.config, ctx.layout, 1))
    provisioner.helper_image = HELPER
    argv = provisioner.argv()
    assert argv[:5] == [
        "/usr/bin/env",
        "HTTP_PROXY=http://127.0.0.1:1",
        "HTTPS_PROXY=http://127.0.0.1:1",
        f"NO_PROXY={HOST_IP}",
        str(local_path_build().binary(ctx.config.cache_dir, "local-path-provisioner")),
    ]
    assert "start" in argv
    assert f"--helper-image={HELPER}" in argv
    assert f"--kubeconfig={ctx.layout.admin_kubeconfig}" in argv
    assert f"--config={provisioner.config_file}" in argv


def test_it_builds_the_upstream_module_at_the_pinned_version() -> None:
    build = local_path_build()
    assert build.requires == (("github.com/rancher/local-path-provisioner", "v0.0.30"),)
    assert build.binaries == ("local-path-provisioner",)


def test_it_runs_after_a_node_and_the_registry_and_only_with_nodes(
    short_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KV_CLUSTER_VIRT_API", "0")
    monkeypatch.setenv("KV_CLUSTER_VIRT_NODE", "0")
    monkeypatch.delenv("KV_CLUSTER_REGISTRY", raising=False)
    ctx = _ctx(short_dir, 2)
    crds = KubevirtCrds(Kubectl(ctx.layout.admin_kubeconfig), None)
    names = [s.name for s in order(Cluster._plan(ctx, NodeSet(ctx, 2), crds, build=False))]
    at = names.index("local-path-provisioner")
    assert names.index("registry") < at
    assert names.index("kubelet-kv-node-0") < at
    assert names.index("kube-apiserver") < at
    assert storage_components(_ctx(short_dir / "none", 0), 0) == []


def test_a_block_volume_is_a_local_pv_on_its_loop_device_for_its_node_only(
    short_dir: Path,
) -> None:
    ctx = _ctx(short_dir, 2)
    node = node_specs(ctx.config, ctx.layout, 2)[1]
    pv = render_block_volume(node, 0, "/dev/loop7")
    assert pv["metadata"]["name"] == "local-block-kv-node-1-0"
    spec = pv["spec"]
    assert (spec["volumeMode"], spec["storageClassName"]) == ("Block", "local-block")
    assert spec["local"] == {"path": "/dev/loop7"}
    assert spec["capacity"] == {"storage": "256Mi"}
    (term,) = spec["nodeAffinity"]["required"]["nodeSelectorTerms"]
    assert term["matchExpressions"] == [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": ["kv-node-1"]}
    ]
