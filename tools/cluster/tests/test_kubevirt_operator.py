"""Operator mode: this cluster's specifics reach the operator's workloads as the KubeVirt
CR's customizeComponents, and the operator's render then equals pods mode's."""

from __future__ import annotations

from pathlib import Path

from kv_cluster.components import ClusterContext
from kv_cluster.config import ClusterConfig, Ports
from kv_cluster.kubevirt_operator import KubevirtOperator
from kv_cluster.layout import StateLayout
from virt_operator.strategy import InstallSpec, render


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


def test_the_crs_patches_make_the_operators_workloads_this_clusters(tmp_path: Path) -> None:
    step = KubevirtOperator(_ctx(tmp_path))
    cr = step.kubevirt_cr("kv-test")
    assert cr["spec"]["imageTag"] == "kv-test"
    spec = InstallSpec.from_kubevirt(cr, registry="docker.io/kubevirt-py", tag="x")
    patched = render(spec)
    view = step._cluster_view()
    for workload in patched.workloads():
        name = workload["metadata"]["name"]
        got = workload["spec"]["template"]["spec"]
        want = view[name]["spec"]["template"]["spec"]
        assert got["containers"][0]["env"] == want["containers"][0]["env"], name
        assert got.get("volumes") == want.get("volumes"), name
        assert got["containers"][0]["args"] == want["containers"][0]["args"] or name != (
            "virt-handler"
        )
    handler = patched.virt_handler["spec"]["template"]["spec"]["containers"][0]
    nodes = str(tmp_path / "state" / "nodes")
    assert f"--kubelet-root={nodes}/$(NODE_NAME)/kubelet/root" in handler["args"]
    (https,) = [
        p
        for p in patched.virt_api["spec"]["template"]["spec"]["containers"][0]["ports"]
        if p["name"] == "https"
    ]
    assert (https["hostIP"], https["hostPort"]) == ("10.95.0.41", 28120)
    # The images stay the operator's (registry and tag of the CR), not pods mode's.
    assert handler["image"] == "docker.io/kubevirt-py/virt-handler:kv-test"
