"""Pod mode renders the repository's manifests with this cluster's images, paths and address."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kv_cluster.components import ClusterContext, ComponentError
from kv_cluster.config import ClusterConfig, Ports
from kv_cluster.kubevirt_pods import (
    kubevirt_mode,
    operator_mode,
    pods_mode,
    render_workloads,
    virt_api_ca_file,
)
from kv_cluster.layout import StateLayout
from kv_cluster.nodes import write_node_count

REFS = {
    "virt-api": "docker.io/kubevirt-py/virt-api:aaaa",
    "virt-controller": "docker.io/kubevirt-py/virt-controller:bbbb",
    "virt-handler": "docker.io/kubevirt-py/virt-handler:cccc",
    "virt-launcher": "docker.io/kubevirt-py/virt-launcher:dddd",
}


def _ctx(tmp_path: Path) -> ClusterContext:
    config = ClusterConfig(
        state_dir=tmp_path / "state",
        cache_dir=tmp_path / "cache",
        ports=Ports(28100),
        host_ip="10.95.0.41",
    )
    return ClusterContext(
        config=config,
        layout=StateLayout(config.state_dir),
        credentials=None,  # type: ignore[arg-type]  # rendering needs no TLS material
        kubernetes_bin=tmp_path,
        etcd_binary=tmp_path,
    )


def _workload(items: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    [found] = [i for i in items if i["kind"] == kind and i["metadata"]["name"] == name]
    return found


def _container(doc: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = doc["spec"]["template"]["spec"]["containers"][0]
    return container


def test_images_and_apiserver_address_are_this_clusters(tmp_path: Path) -> None:
    items = render_workloads(_ctx(tmp_path), REFS)
    for kind, name, image in (
        ("Deployment", "virt-api", REFS["virt-api"]),
        ("Deployment", "virt-controller", REFS["virt-controller"]),
        ("DaemonSet", "virt-handler", REFS["virt-handler"]),
    ):
        container = _container(_workload(items, kind, name))
        assert container["image"] == image
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["KUBERNETES_SERVICE_HOST"] == "10.95.0.41"
        assert env["KUBERNETES_SERVICE_PORT"] == "28102"
    controller = _container(_workload(items, "Deployment", "virt-controller"))
    assert f"--launcher-image={REFS['virt-launcher']}" in controller["args"]
    assert sum(a.startswith("--launcher-image=") for a in controller["args"]) == 1
    api = _container(_workload(items, "Deployment", "virt-api"))
    [https] = [p for p in api["ports"] if p["name"] == "https"]
    assert (https["hostIP"], https["hostPort"]) == ("10.95.0.41", 28120)


def test_a_changed_image_is_pulled_and_an_unchanged_one_is_not(tmp_path: Path) -> None:
    """Content tags with IfNotPresent: a new build is a new name, so the node pulls it."""
    for item in render_workloads(_ctx(tmp_path), REFS):
        if item["kind"] in ("Deployment", "DaemonSet"):
            for container in item["spec"]["template"]["spec"]["containers"]:
                assert container["image"] in REFS.values()
                assert container["imagePullPolicy"] == "IfNotPresent"


def test_each_handler_uses_its_own_nodes_kubelet_root(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    handler = _workload(render_workloads(ctx, REFS), "DaemonSet", "virt-handler")
    container = _container(handler)
    nodes = ctx.layout.root / "nodes"
    assert f"--kubelet-root={nodes}/$(NODE_NAME)/kubelet/root" in container["args"]
    assert f"--runtime-dir={nodes}/$(NODE_NAME)/kubevirt" in container["args"]
    assert not any(
        "/var/lib/kubelet" in str(v) for v in handler["spec"]["template"]["spec"]["volumes"]
    )
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert str(nodes) in mounts
    assert "/var/lib/kubelet" not in mounts


def test_an_unknown_mode_is_refused_naming_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KV_CLUSTER_KUBEVIRT", "cloud")
    with pytest.raises(
        ComponentError, match="KV_CLUSTER_KUBEVIRT must be `host`, `pods` or `operator`"
    ):
        kubevirt_mode()


def test_the_operator_is_the_default_with_a_node_and_host_mode_otherwise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx = _ctx(tmp_path)
    for var in ("KV_CLUSTER_KUBEVIRT", "KV_CLUSTER_VIRT_API", "KV_CLUSTER_VIRT_NODE"):
        monkeypatch.delenv(var, raising=False)
    assert not operator_mode(ctx)
    assert not pods_mode(ctx)
    assert virt_api_ca_file(ctx).name == "virt-api-ca.crt"
    write_node_count(ctx.layout, 1)
    assert operator_mode(ctx)
    assert not pods_mode(ctx)
    assert virt_api_ca_file(ctx).name == "kubevirt-ca.crt"  # the operator's CA, copied
    monkeypatch.setenv("KV_CLUSTER_VIRT_NODE", "0")
    assert not operator_mode(ctx)  # a component left out keeps host mode's meaning
    monkeypatch.delenv("KV_CLUSTER_VIRT_NODE")
    monkeypatch.setenv("KV_CLUSTER_KUBEVIRT", "pods")
    assert pods_mode(ctx)
    assert not operator_mode(ctx)
    assert virt_api_ca_file(ctx).name == "virt-api-ca.crt"
    monkeypatch.setenv("KV_CLUSTER_KUBEVIRT", "host")
    assert not pods_mode(ctx)
    assert not operator_mode(ctx)
