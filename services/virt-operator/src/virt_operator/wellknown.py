"""Upstream virt-operator's names: labels, annotations, the finalizer, phases, conditions.

Values from kubevirt/kubevirt `pkg/virt-operator/util/client.go`, `.../install/strategy.go`
and `api/core/v1/types.go`; the names tests and users match on.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = [
    "FIELD_MANAGER",
    "FINALIZER",
    "IDENTIFIER_ANNOTATION",
    "INSTALL_STRATEGY_LABEL",
    "MANAGED_BY",
    "MANAGED_BY_LABEL",
    "OPERATOR_APP",
    "REGISTRY_ANNOTATION",
    "VERSION_ANNOTATION",
    "ConditionType",
    "Phase",
    "Reason",
    "UninstallStrategy",
]

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "virt-operator"
VERSION_ANNOTATION = "kubevirt.io/install-strategy-version"
REGISTRY_ANNOTATION = "kubevirt.io/install-strategy-registry"
IDENTIFIER_ANNOTATION = "kubevirt.io/install-strategy-identifier"
INSTALL_STRATEGY_LABEL = "kubevirt.io/install-strategy"
FINALIZER = "kubevirt.io/foregroundDeleteKubeVirt"
FIELD_MANAGER = "virt-operator"
#: The `kubevirt.io` label of the operator's own pods (its webhook Service selects them).
OPERATOR_APP = "virt-operator"


class Phase(StrEnum):
    DEPLOYING = "Deploying"
    DEPLOYED = "Deployed"
    DELETING = "Deleting"
    DELETED = "Deleted"


class ConditionType(StrEnum):
    AVAILABLE = "Available"
    PROGRESSING = "Progressing"
    DEGRADED = "Degraded"
    CREATED = "Created"
    SYNCHRONIZED = "Synchronized"


class Reason(StrEnum):
    EXISTING_DEPLOYMENT = "ExistingDeployment"
    DEPLOYMENT_FAILED = "DeploymentFailed"
    DELETION_FAILED = "DeletionFailed"
    ALL_RESOURCES_CREATED = "AllResourcesCreated"
    ALL_COMPONENTS_READY = "AllComponentsReady"
    DEPLOYING = "DeploymentInProgress"
    UPDATING = "UpdateInProgress"
    DELETING = "DeletionInProgress"


class UninstallStrategy(StrEnum):
    REMOVE_WORKLOADS = "RemoveWorkloads"
    BLOCK_IF_WORKLOADS_EXIST = "BlockUninstallIfWorkloadsExist"
