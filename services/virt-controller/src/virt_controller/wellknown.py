"""Names KubeVirt gives to labels, annotations and finalizers (upstream's values).

Resource coordinates live in kubevirt_api.resources (re-exported by kube_runtime); the
migration names in kubevirt_api.migrations (MIGRATION_JOB_LABEL is re-exported here), the
VMI finalizer in kubevirt_api.defaults (virt-api sets it on create; re-exported here).
"""

from __future__ import annotations

from kubevirt_api.defaults import VMI_FINALIZER
from kubevirt_api.migrations import MIGRATION_JOB_LABEL

__all__ = [
    "APP_LABEL",
    "COMPUTE_CONTAINER",
    "CREATED_BY_LABEL",
    "DOMAIN_ANNOTATION",
    "HEARTBEAT_ANNOTATION",
    "LAUNCHER_VALUE",
    "MIGRATION_JOB_LABEL",
    "NODE_NAME_LABEL",
    "NODE_SCHEDULABLE_LABEL",
    "READINESS_GATE",
    "VMI_FINALIZER",
    "VM_FINALIZER",
    "VM_NAME_LABEL",
]

APP_LABEL = "kubevirt.io"
LAUNCHER_VALUE = "virt-launcher"
CREATED_BY_LABEL = "kubevirt.io/created-by"
NODE_NAME_LABEL = "kubevirt.io/nodeName"
NODE_SCHEDULABLE_LABEL = "kubevirt.io/schedulable"
VM_NAME_LABEL = "vm.kubevirt.io/name"
DOMAIN_ANNOTATION = "kubevirt.io/domain"
HEARTBEAT_ANNOTATION = "kubevirt.io/heartbeat"
# The VM controller holds this on the VMIs it creates, to see their final state.
VM_FINALIZER = "kubevirt.io/virtualMachineControllerFinalize"
READINESS_GATE = "kubevirt.io/virtual-machine-unpaused"
COMPUTE_CONTAINER = "compute"
