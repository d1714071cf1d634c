"""The KubeVirt CR `kubevirt/kubevirt`: the configuration every KubeVirt component reads.

Created with `developerConfiguration.useEmulation: true` when KVM cannot run guests here
(this host kind has a kvm-pvm /dev/kvm without vmx/svm, so TCG), and FEATURE_GATES on,
once its CRD exists.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from kv_cluster.components import ClusterContext
from kv_cluster.kubectl import Kubectl
from kv_cluster.plan import KUBEVIRT_CONFIG, KUBEVIRT_CRDS

__all__ = [
    "FEATURE_GATES",
    "NAMESPACE",
    "KubevirtConfig",
    "developer_configuration",
    "ensure_kubevirt_cr",
    "kvm_runs_guests",
]

NAMESPACE = "kubevirt"


def kvm_runs_guests() -> bool:
    """True when /dev/kvm is usable for real guests (the CPU has vmx or svm)."""
    if not os.path.exists("/dev/kvm"):
        return False
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return " vmx" in flags or " svm" in flags


#: The feature gates the local cluster turns on:
#: - ObjectGraph (alpha upstream), so `virtctl objectgraph` works out of the box;
#: - ImageVolume: this cluster's Kubernetes and containerd (2.x) serve image volumes, so
#:   containerDisks and kernelBoot images are mounted into the launcher pod instead of
#:   copied by init containers (a VM starts about two seconds sooner).
FEATURE_GATES = ("ObjectGraph", "ImageVolume")


def developer_configuration() -> dict[str, Any]:
    """The KubeVirt CR's developerConfiguration here: emulation when KVM cannot run
    guests, and FEATURE_GATES."""
    return {"useEmulation": not kvm_runs_guests(), "featureGates": list(FEATURE_GATES)}


def ensure_kubevirt_cr(kubectl: Kubectl) -> None:
    """Create (or update) the namespace and the KubeVirt CR, useEmulation when KVM cannot
    run guests. Needs the KubeVirt CRD Established."""
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    body = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "KubeVirt",
        "metadata": {"name": "kubevirt", "namespace": NAMESPACE},
        "spec": {
            "configuration": {
                "developerConfiguration": developer_configuration(),
            }
        },
    }
    kubectl.run(
        "apply",
        "--server-side",
        "--field-manager=kv-cluster",
        "-f",
        "-",
        stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": [namespace, body]}),
    )


class KubevirtConfig:
    """The step of `up` that makes the KubeVirt CR exist (after the CRDs)."""

    name = "kubevirt-cr"
    requires = frozenset({KUBEVIRT_CRDS})
    provides = frozenset({KUBEVIRT_CONFIG})

    def __init__(self, ctx: ClusterContext) -> None:
        self.kubectl = Kubectl(ctx.layout.admin_kubeconfig)

    def ensure(self) -> str:
        ensure_kubevirt_cr(self.kubectl)
        return "applied"
