"""VirtualMachine admission: run strategy, template, data volume templates, instancetypes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..clusterconfig import ClusterConfig
from ..values import as_list, as_map, as_str
from .causes import Cause, CauseType, FieldPath
from .storage import DATA_VOLUME_UNSUPPORTED
from .vmi import validate_vmi_metadata, validate_vmi_spec

__all__ = ["RUN_STRATEGIES", "validate_vm", "validate_vm_spec"]

RUN_STRATEGIES = ("Always", "RerunOnFailure", "Halted", "Manual", "Once", "WaitAsReceiver")
INSTANCETYPE_KINDS = (
    "VirtualMachineInstancetype",
    "VirtualMachineClusterInstancetype",
    "virtualmachineinstancetype",
    "virtualmachineclusterinstancetype",
)
PREFERENCE_KINDS = (
    "VirtualMachinePreference",
    "VirtualMachineClusterPreference",
    "virtualmachinepreference",
    "virtualmachineclusterpreference",
)


def validate_vm_spec(spec: object, path: FieldPath, config: ClusterConfig) -> list[Cause]:
    """Rules on a VirtualMachine spec (also used for the VM template of a pool)."""
    if not isinstance(spec, Mapping):
        return [Cause(str(path), "spec must be an object", CauseType.REQUIRED)]
    causes: list[Cause] = []
    if "running" in spec and "runStrategy" in spec:
        causes.append(
            Cause(
                str(path.child("running")),
                "running and runStrategy are mutually exclusive; set only spec.runStrategy",
            )
        )
    strategy = spec.get("runStrategy")
    if strategy is not None and strategy not in RUN_STRATEGIES:
        causes.append(
            Cause(
                str(path.child("runStrategy")),
                f"runStrategy '{strategy}' is not supported; use one of {', '.join(RUN_STRATEGIES)}",
                CauseType.NOT_SUPPORTED,
            )
        )
    tpath = path.child("template")
    template = spec.get("template")
    if not isinstance(template, Mapping):
        causes.append(Cause(str(tpath), "a VirtualMachine needs a template", CauseType.REQUIRED))
        return causes
    tspec = template.get("spec")
    causes.extend(validate_vmi_spec(tspec, tpath.child("spec"), config))
    causes.extend(
        validate_vmi_metadata(
            template.get("metadata"), tpath.child("metadata"), config, trusted=True
        )
    )
    causes.extend(_check_data_volume_templates(spec, path))
    causes.extend(
        _check_matcher(spec.get("instancetype"), path.child("instancetype"), INSTANCETYPE_KINDS)
    )
    causes.extend(
        _check_matcher(spec.get("preference"), path.child("preference"), PREFERENCE_KINDS)
    )
    return causes


def validate_vm(vm: Mapping[str, Any], config: ClusterConfig) -> list[Cause]:
    """Everything checked when a VirtualMachine is created or updated."""
    return validate_vm_spec(vm.get("spec"), FieldPath("spec"), config)


def _check_data_volume_templates(spec: Mapping[str, Any], path: FieldPath) -> list[Cause]:
    """Each dataVolumeTemplate is refused: the DataVolume it would create needs CDI."""
    return [
        Cause(str(path.child("dataVolumeTemplates").index(i)), DATA_VOLUME_UNSUPPORTED)
        for i, _ in enumerate(as_list(spec.get("dataVolumeTemplates")))
    ]


def _check_matcher(matcher: object, field: FieldPath, kinds: tuple[str, ...]) -> list[Cause]:
    if matcher is None:
        return []
    body = as_map(matcher)
    causes: list[Cause] = []
    if not as_str(body.get("name")) and not as_str(body.get("inferFromVolume")):
        causes.append(
            Cause(
                str(field.child("name")),
                "name (or inferFromVolume) is required",
                CauseType.REQUIRED,
            )
        )
    kind = as_str(body.get("kind"))
    if kind is not None and kind not in kinds:
        causes.append(
            Cause(
                str(field.child("kind")),
                f"kind '{kind}' is not supported; use {kinds[0]} or {kinds[1]}",
                CauseType.NOT_SUPPORTED,
            )
        )
    return causes
