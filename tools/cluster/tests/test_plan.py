"""`up` orders its steps by what each needs, and refuses a plan with a need unmet."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from kv_cluster.cluster import Cluster
from kv_cluster.components import ClusterContext
from kv_cluster.config import ClusterConfig, Ports
from kv_cluster.crds import KubevirtCrds
from kv_cluster.kubectl import Kubectl
from kv_cluster.layout import StateLayout
from kv_cluster.node import NodeSet
from kv_cluster.nodes import write_node_count
from kv_cluster.plan import KUBEVIRT_CRDS, PlanError, order


@dataclass(frozen=True)
class FakeStep:
    name: str
    requires: frozenset[str] = field(default_factory=frozenset)
    provides: frozenset[str] = field(default_factory=frozenset)


def _names(steps: list[FakeStep]) -> list[str]:
    return [s.name for s in steps]


def test_a_step_moves_after_the_providers_of_what_it_needs() -> None:
    workload = FakeStep("workload", requires=frozenset({"crds", "node"}))
    crds = FakeStep("crds", requires=frozenset({"api"}), provides=frozenset({"crds"}))
    api = FakeStep("api", provides=frozenset({"api"}))
    node = FakeStep("node", requires=frozenset({"api"}), provides=frozenset({"node"}))
    assert _names(order([workload, api, node, crds])) == ["api", "node", "crds", "workload"]


def test_steps_without_needs_between_them_keep_their_order() -> None:
    steps = [FakeStep(n) for n in ("c", "a", "b")]
    assert _names(order(steps)) == ["c", "a", "b"]


def test_a_need_nothing_provides_is_refused_naming_step_and_remedy() -> None:
    workload = FakeStep("kubevirt", requires=frozenset({KUBEVIRT_CRDS}))
    with pytest.raises(PlanError) as caught:
        order([FakeStep("api", provides=frozenset({"api"})), workload])
    message = str(caught.value)
    assert "kubevirt needs kubevirt-crds" in message
    assert "--no-crds" in message


def test_a_cycle_is_refused_naming_what_each_waits_for() -> None:
    a = FakeStep("a", requires=frozenset({"b"}), provides=frozenset({"a"}))
    b = FakeStep("b", requires=frozenset({"a"}), provides=frozenset({"b"}))
    with pytest.raises(PlanError, match="cycle: a waits for b; b waits for a"):
        order([a, b])


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A state dir short enough for the nodes' socket paths (pytest's tmp_path is not)."""
    with tempfile.TemporaryDirectory(prefix="kvplan", dir="/tmp") as name:
        yield Path(name)


def _ctx(tmp_path: Path, nodes: int) -> ClusterContext:
    config = ClusterConfig(
        state_dir=tmp_path / "s",
        cache_dir=tmp_path / "cache",
        ports=Ports(28200),
        host_ip="10.95.0.42",
    )
    layout = StateLayout(config.state_dir)
    layout.create()
    write_node_count(layout, nodes)
    return ClusterContext(
        config=config,
        layout=layout,
        credentials=None,  # type: ignore[arg-type]  # planning needs no TLS material
        kubernetes_bin=tmp_path,
        etcd_binary=tmp_path,
    )


@pytest.mark.parametrize("mode", ["pods", "host"])
def test_a_new_cluster_applies_crds_and_the_kubevirt_cr_before_kubevirt_starts(
    short_dir: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """The fresh-machine bug: workloads that list VMs started before the CRDs existed."""
    for var in ("KV_CLUSTER_VIRT_API", "KV_CLUSTER_VIRT_NODE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("KV_CLUSTER_KUBEVIRT", mode)
    ctx = _ctx(short_dir, nodes=1)
    crds = KubevirtCrds(Kubectl(ctx.layout.admin_kubeconfig), None)
    names = [s.name for s in order(Cluster._plan(ctx, NodeSet(ctx, 1), crds, build=False))]
    kubevirt = ["kubevirt"] if mode == "pods" else ["virt-api", "virt-controller"]
    first_kubevirt = min(names.index(n) for n in kubevirt)
    assert names.index("kube-apiserver") < names.index("crds") < names.index("kubevirt-cr")
    assert names.index("kubevirt-cr") < first_kubevirt
    assert names.index("kubelet-kv-node-0") < first_kubevirt
    # The opt-out is read from the KubeVirt CR, so the instancetypes come after it.
    assert names.index("kubevirt-cr") < names.index("common-instancetypes")


def test_through_the_operator_kv_cluster_installs_no_crds_and_no_cr_of_its_own(
    short_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Operator mode: the release manifests and the operator are the one deployment truth."""
    for var in ("KV_CLUSTER_VIRT_API", "KV_CLUSTER_VIRT_NODE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("KV_CLUSTER_KUBEVIRT", "operator")
    ctx = _ctx(short_dir, nodes=1)
    crds = KubevirtCrds(Kubectl(ctx.layout.admin_kubeconfig), None)
    names = [s.name for s in order(Cluster._plan(ctx, NodeSet(ctx, 1), crds, build=False))]
    assert "crds" not in names
    assert "kubevirt-cr" not in names
    assert names.index("kubelet-kv-node-0") < names.index("kubevirt")
    # The instancetypes need the CRDs and the CR, which the operator's step provides.
    assert names.index("kubevirt") < names.index("common-instancetypes")


def test_a_node_less_control_plane_with_crds_installs_the_common_instancetypes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KV_CLUSTER_VIRT_API", "0")
    monkeypatch.setenv("KV_CLUSTER_VIRT_NODE", "0")
    ctx = _ctx(tmp_path, nodes=0)
    crds = KubevirtCrds(Kubectl(ctx.layout.admin_kubeconfig), None)
    names = [s.name for s in order(Cluster._plan(ctx, NodeSet(ctx, 0), crds, build=False))]
    assert "kubevirt-cr" not in names
    assert names.index("crds") < names.index("common-instancetypes")


def test_no_crds_with_kubevirt_components_is_refused_before_anything_starts(
    short_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("KV_CLUSTER_VIRT_API", "KV_CLUSTER_VIRT_NODE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("KV_CLUSTER_KUBEVIRT", "pods")  # the operator brings its own CRDs
    ctx = _ctx(short_dir, nodes=1)
    with pytest.raises(PlanError, match="kubevirt needs kubevirt-config, kubevirt-crds"):
        order(Cluster._plan(ctx, NodeSet(ctx, 1), None, build=False))


def test_control_plane_only_needs_no_crds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KV_CLUSTER_VIRT_API", "0")
    monkeypatch.setenv("KV_CLUSTER_VIRT_NODE", "0")
    ctx = _ctx(tmp_path, nodes=0)
    names = [s.name for s in order(Cluster._plan(ctx, NodeSet(ctx, 0), None, build=False))]
    assert names == ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"]
