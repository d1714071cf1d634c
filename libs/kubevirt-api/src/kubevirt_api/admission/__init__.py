"""Admission rules for KubeVirt's kinds, shared by virt-api's webhooks and `virtctl validate`.

Rules read raw objects (dicts as decoded from JSON/YAML) tolerantly and return every
problem they find as a `Cause` naming the field path and what would be valid.
"""

from ..clusterconfig import ClusterConfig
from .causes import Cause, CauseType, FieldPath
from .dispatch import ADMITTED_KINDS, Operation, validate_object
from .hotplug import check_hotplug_disk, validate_hotplug_storage
from .instancetype import validate_instancetype, validate_preference
from .migration import validate_migration_create, validate_migration_update
from .migration_policy import validate_migration_policy
from .preset import validate_preset
from .quantity import parse_quantity
from .replicas import validate_pool, validate_replicaset
from .snapshot import validate_restore, validate_snapshot
from .status import validate_status_update
from .vm import RUN_STRATEGIES, validate_vm, validate_vm_spec
from .vmi import validate_vmi_create, validate_vmi_metadata, validate_vmi_spec, validate_vmi_update

__all__ = [
    "ADMITTED_KINDS",
    "RUN_STRATEGIES",
    "Cause",
    "CauseType",
    "ClusterConfig",
    "FieldPath",
    "Operation",
    "check_hotplug_disk",
    "parse_quantity",
    "validate_hotplug_storage",
    "validate_instancetype",
    "validate_migration_create",
    "validate_migration_policy",
    "validate_migration_update",
    "validate_object",
    "validate_pool",
    "validate_preference",
    "validate_preset",
    "validate_replicaset",
    "validate_restore",
    "validate_snapshot",
    "validate_status_update",
    "validate_vm",
    "validate_vm_spec",
    "validate_vmi_create",
    "validate_vmi_metadata",
    "validate_vmi_spec",
    "validate_vmi_update",
]
