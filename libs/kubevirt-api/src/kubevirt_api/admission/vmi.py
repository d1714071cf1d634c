"""VirtualMachineInstance admission: the shared spec rules, create and update."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..clusterconfig import ClusterConfig
from ..migrations import MIGRATION_JOB_LABEL, MIGRATION_TARGET_NODE_LABEL
from ..values import as_map, as_str
from .causes import Cause, CauseType, FieldPath
from .compute import check_compute, check_memory_requested
from .guest import check_guest
from .hotplug import validate_hotplug_storage
from .network import check_networks
from .storage import check_boot_orders, check_disks, check_volumes, check_volumes_have_disks

__all__ = [
    "RESTRICTED_LABELS",
    "SIDECAR_ANNOTATION",
    "validate_vmi_create",
    "validate_vmi_metadata",
    "validate_vmi_spec",
    "validate_vmi_update",
]

# Labels only KubeVirt's own components may set on a VMI.
RESTRICTED_LABELS = frozenset(
    {
        "kubevirt.io/created-by",
        MIGRATION_JOB_LABEL,
        "kubevirt.io/nodeName",
        MIGRATION_TARGET_NODE_LABEL,
        "kubevirt.io/schedulable",
        "kubevirt.io/install-strategy",
    }
)
SIDECAR_ANNOTATION = "hooks.kubevirt.io/hookSidecars"


def validate_vmi_spec(spec: object, path: FieldPath, config: ClusterConfig) -> list[Cause]:
    """The rules every VMI spec obeys, wherever it appears (VMI, VM template, pool, ...)."""
    if not isinstance(spec, Mapping):
        return [Cause(str(path), "spec must be an object", CauseType.REQUIRED)]
    causes: list[Cause] = []
    causes.extend(check_disks(spec, path))
    causes.extend(check_volumes(spec, path, config))
    causes.extend(check_boot_orders(spec, path))
    causes.extend(check_networks(spec, path, config))
    causes.extend(check_compute(spec, path, config))
    causes.extend(check_guest(spec, path, config))
    return causes


def validate_vmi_metadata(
    metadata: object, path: FieldPath, config: ClusterConfig, *, trusted: bool = False
) -> list[Cause]:
    """Restricted labels (unless a KubeVirt component asks) and gated annotations."""
    meta = as_map(metadata)
    causes: list[Cause] = []
    if not trusted:
        for label in sorted(RESTRICTED_LABELS & set(as_map(meta.get("labels")))):
            causes.append(
                Cause(
                    str(path.child("labels").key(label)),
                    f"label {label} is reserved for KubeVirt's own components; remove it",
                    CauseType.FORBIDDEN,
                )
            )
    if SIDECAR_ANNOTATION in as_map(meta.get("annotations")) and not config.gate("Sidecar"):
        causes.append(
            Cause(
                str(path.child("annotations").key(SIDECAR_ANNOTATION)),
                "hook sidecars need the Sidecar feature gate",
                CauseType.FORBIDDEN,
            )
        )
    return causes


def validate_vmi_create(
    vmi: Mapping[str, Any], config: ClusterConfig, *, trusted: bool = False
) -> list[Cause]:
    """Everything checked when a VMI is created (`trusted`: the requester is KubeVirt itself)."""
    spec_path = FieldPath("spec")
    spec = vmi.get("spec")
    causes = validate_vmi_spec(spec, spec_path, config)
    if isinstance(spec, Mapping):
        causes.extend(check_volumes_have_disks(spec, spec_path))
        causes.extend(check_memory_requested(spec, spec_path))
    causes.extend(
        validate_vmi_metadata(vmi.get("metadata"), FieldPath("metadata"), config, trusted=trusted)
    )
    return causes


def validate_vmi_update(
    new: Mapping[str, Any], old: Mapping[str, Any], *, trusted: bool = False
) -> list[Cause]:
    """A VMI's spec is fixed once created, except for KubeVirt's own components.

    Users change a running guest through its VM (which restarts or hot-plugs it), never by
    editing the VMI; restricted labels may likewise only change when KubeVirt changes them.
    KubeVirt's components (virt-api's addvolume, the VM controller) may change volumes
    and disks only as volume hotplug allows (`validate_hotplug_storage`).
    """
    causes: list[Cause] = []
    if trusted:
        if new.get("spec") != old.get("spec"):
            causes.extend(validate_hotplug_storage(new, old))
        return causes
    if new.get("spec") != old.get("spec"):
        causes.append(
            Cause(
                "spec",
                "a VirtualMachineInstance's spec cannot be changed after creation; change the "
                "VirtualMachine's template and restart it instead",
                CauseType.FORBIDDEN,
            )
        )
    new_labels = as_map(as_map(new.get("metadata")).get("labels"))
    old_labels = as_map(as_map(old.get("metadata")).get("labels"))
    for label in sorted(RESTRICTED_LABELS):
        if as_str(new_labels.get(label)) != as_str(old_labels.get(label)):
            causes.append(
                Cause(
                    str(FieldPath("metadata").child("labels").key(label)),
                    f"label {label} is reserved for KubeVirt's own components and cannot be changed",
                    CauseType.FORBIDDEN,
                )
            )
    return causes
