"""Pick the rules for an object by its apiVersion group and kind (used offline by virtctl)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from ..clusterconfig import ClusterConfig
from ..values import as_str
from .causes import Cause, CauseType
from .instancetype import validate_instancetype, validate_preference
from .migration import validate_migration_create, validate_migration_update
from .migration_policy import validate_migration_policy
from .preset import validate_preset
from .replicas import validate_pool, validate_replicaset
from .snapshot import validate_restore, validate_snapshot
from .vm import validate_vm
from .vmi import validate_vmi_create, validate_vmi_update

__all__ = ["ADMITTED_KINDS", "Operation", "validate_object"]

Operation = Literal["CREATE", "UPDATE"]

ADMITTED_KINDS: frozenset[tuple[str, str]] = frozenset(
    {
        ("kubevirt.io", "VirtualMachineInstance"),
        ("kubevirt.io", "VirtualMachine"),
        ("kubevirt.io", "VirtualMachineInstanceReplicaSet"),
        ("kubevirt.io", "VirtualMachineInstanceMigration"),
        ("kubevirt.io", "VirtualMachineInstancePreset"),
        ("pool.kubevirt.io", "VirtualMachinePool"),
        ("instancetype.kubevirt.io", "VirtualMachineInstancetype"),
        ("instancetype.kubevirt.io", "VirtualMachineClusterInstancetype"),
        ("instancetype.kubevirt.io", "VirtualMachinePreference"),
        ("instancetype.kubevirt.io", "VirtualMachineClusterPreference"),
        ("migrations.kubevirt.io", "MigrationPolicy"),
        ("snapshot.kubevirt.io", "VirtualMachineSnapshot"),
        ("snapshot.kubevirt.io", "VirtualMachineRestore"),
    }
)


def validate_object(
    obj: Mapping[str, Any],
    config: ClusterConfig | None = None,
    *,
    operation: Operation = "CREATE",
    old: Mapping[str, Any] | None = None,
    trusted: bool = False,
) -> list[Cause]:
    """The admission rules for `obj` as virt-api would apply them; [] means admitted.

    Kinds outside KubeVirt's groups get one cause saying which kinds are known.
    """
    config = config or ClusterConfig()
    group = (as_str(obj.get("apiVersion")) or "").rpartition("/")[0]
    kind = as_str(obj.get("kind")) or ""
    if (group, kind) not in ADMITTED_KINDS:
        return [
            Cause(
                "kind",
                f"'{group}/{kind}' has no admission rules; known kinds are "
                + ", ".join(sorted(k for _, k in ADMITTED_KINDS)),
                CauseType.NOT_SUPPORTED,
            )
        ]
    updating = operation == "UPDATE" and old is not None
    if kind == "VirtualMachineInstance":
        if updating and old is not None:
            return validate_vmi_update(obj, old, trusted=trusted)
        return validate_vmi_create(obj, config, trusted=trusted)
    if kind == "VirtualMachine":
        return validate_vm(obj, config)
    if kind == "VirtualMachineInstanceReplicaSet":
        return validate_replicaset(obj, config)
    if kind == "VirtualMachineInstanceMigration":
        if updating and old is not None:
            return validate_migration_update(obj, old)
        return validate_migration_create(obj)
    if kind == "VirtualMachineInstancePreset":
        return validate_preset(obj, config)
    if kind == "VirtualMachinePool":
        return validate_pool(obj, config)
    if kind == "VirtualMachineSnapshot":
        return validate_snapshot(obj, old if updating else None)
    if kind == "VirtualMachineRestore":
        return validate_restore(obj, old if updating else None)
    if kind.endswith("Instancetype"):
        return validate_instancetype(obj)
    if kind.endswith("Preference"):
        return validate_preference(obj)
    return validate_migration_policy(obj)
