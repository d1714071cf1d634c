"""The order of `up`: each step names what it needs and what it provides.

`up` used to start steps in the order a list happened to have, and KubeVirt's workloads
were deployed before the CRDs they list were applied (they never became ready, and the
CRDs were never applied because `up` raised first). Now every step declares its
prerequisites as capabilities (`requires`) and the capabilities it brings (`provides`);
`order` puts a step after every step that provides what it requires, keeps the given order
otherwise, and refuses a plan in which something required is provided by no step, naming
the step, the missing capability and what would provide it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol, TypeVar

__all__ = [
    "APISERVER",
    "CONTROLLER_MANAGER",
    "DNS",
    "ETCD",
    "KUBEVIRT_ADMISSION",
    "KUBEVIRT_CONFIG",
    "KUBEVIRT_CRDS",
    "NODE",
    "REGISTRY",
    "SCHEDULER",
    "STORAGE_CLASS",
    "PlanError",
    "Step",
    "containerd_on",
    "node_named",
    "order",
]

ETCD = "etcd"
APISERVER = "apiserver"
CONTROLLER_MANAGER = "controller-manager"
SCHEDULER = "scheduler"
DNS = "cluster-dns"
#: At least one node runs pods (every kubelet provides it).
NODE = "node"
#: manifests/crds applied and Established.
KUBEVIRT_CRDS = "kubevirt-crds"
#: The cluster's image registry serves (nodes pull from it; image steps push to it).
REGISTRY = "registry"
#: A default StorageClass provisions claims (kv_cluster.storage).
STORAGE_CLASS = "storage-class"
#: The KubeVirt CR `kubevirt/kubevirt` exists (its configuration is what components read).
KUBEVIRT_CONFIG = "kubevirt-config"
#: virt-api serves KubeVirt's admission webhooks (objects applied after it are validated by
#: the virt-api of this `up`, not by an older one still registered).
KUBEVIRT_ADMISSION = "kubevirt-admission"

# What to do when nothing provides a capability: the usual reason and its remedy.
_HINTS = {
    KUBEVIRT_CRDS: (
        "KubeVirt's components list VMs and VMIs, so they need manifests/crds applied: drop "
        "--no-crds (install=False), or leave KubeVirt out with KV_CLUSTER_VIRT_API=0 "
        "KV_CLUSTER_VIRT_NODE=0"
    ),
    NODE: "a workload needs a node to run on: give `up` --nodes 1 or more",
}


def containerd_on(node: str) -> str:
    """The capability of node `node`'s containerd running."""
    return f"containerd:{node}"


def node_named(node: str) -> str:
    """The capability of node `node`'s kubelet running and registered."""
    return f"node:{node}"


class Step(Protocol):
    """One thing `up` makes true: a process, a set of manifests, a workload."""

    @property
    def name(self) -> str: ...

    @property
    def requires(self) -> frozenset[str]: ...

    @property
    def provides(self) -> frozenset[str]: ...


class PlanError(RuntimeError):
    """The steps cannot run in any order: something required is provided by nothing."""


S = TypeVar("S", bound=Step)


def order(steps: Iterable[S]) -> list[S]:
    """`steps` in an order where each comes after the providers of all it requires.

    Stable: among steps whose prerequisites are met, the earlier in `steps` goes first.
    Raises PlanError naming the step and the capability when a requirement has no
    provider among `steps`, or when requirements form a cycle.
    """
    pending = list(steps)
    provided_by: dict[str, list[str]] = {}
    for step in pending:
        for capability in step.provides:
            provided_by.setdefault(capability, []).append(step.name)
    for step in pending:
        missing = sorted(step.requires - provided_by.keys())
        if missing:
            raise PlanError(_missing(step, missing))
    done: set[str] = set()
    ordered: list[S] = []
    while pending:
        ready = next((s for s in pending if s.requires <= done), None)
        if ready is None:
            raise PlanError(_cycle(pending, done))
        pending.remove(ready)
        ordered.append(ready)
        done |= ready.provides
    return ordered


def _missing(step: Step, missing: Sequence[str]) -> str:
    lines = [f"{step.name} needs {', '.join(missing)}, which no step of this `up` provides"]
    lines += [
        f"  {capability}: {_HINTS[capability]}" for capability in missing if capability in _HINTS
    ]
    return "\n".join(lines)


def _cycle(pending: Sequence[Step], done: set[str]) -> str:
    waits = "; ".join(f"{s.name} waits for {', '.join(sorted(s.requires - done))}" for s in pending)
    return f"the steps' prerequisites form a cycle: {waits}"
