"""VirtualMachineSnapshot and VirtualMachineRestore admission (the rules on the object alone).

Upstream's rules: the source or target is a `kubevirt.io` VirtualMachine, the enumerated
policies hold one of their values, and the spec never changes after creation. What needs
other objects (another restore in progress, a failed snapshot) is virt-api's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from ..durations import DurationError, parse_duration
from ..values import as_map, as_str
from .causes import Cause, CauseType, FieldPath

__all__ = [
    "DELETION_POLICIES",
    "TARGET_READINESS_POLICIES",
    "VOLUME_RESTORE_POLICIES",
    "validate_restore",
    "validate_snapshot",
]

DELETION_POLICIES: Final = ("Delete", "Retain")
TARGET_READINESS_POLICIES: Final = (
    "WaitGracePeriod",
    "StopTarget",
    "FailImmediate",
    "WaitEventually",
)
VOLUME_RESTORE_POLICIES: Final = ("RandomizeNames", "InPlace", "PrefixTargetName")


def _vm_reference(ref: Mapping[str, Any], path: FieldPath, what: str) -> list[Cause]:
    causes: list[Cause] = []
    group = ref.get("apiGroup")
    if not as_str(group):
        causes.append(
            Cause(
                str(path.child("apiGroup")),
                f"missing apiGroup: the {what} must be a kubevirt.io VirtualMachine",
                CauseType.REQUIRED,
            )
        )
    elif group != "kubevirt.io":
        causes.append(
            Cause(
                str(path.child("apiGroup")),
                f"invalid apiGroup '{group}': only kubevirt.io is supported",
                CauseType.NOT_SUPPORTED,
            )
        )
    kind = ref.get("kind")
    if kind != "VirtualMachine":
        causes.append(
            Cause(
                str(path.child("kind")),
                f"invalid kind '{as_str(kind) or ''}': only VirtualMachine is supported",
                CauseType.NOT_SUPPORTED,
            )
        )
    if not as_str(ref.get("name")):
        causes.append(
            Cause(
                str(path.child("name")),
                f"the {what}'s name is required",
                CauseType.REQUIRED,
            )
        )
    return causes


def _one_of(value: object, allowed: tuple[str, ...], path: FieldPath) -> list[Cause]:
    if value is None or value in allowed:
        return []
    return [
        Cause(
            str(path),
            f"'{value}' is not supported; valid values are " + ", ".join(allowed),
            CauseType.NOT_SUPPORTED,
        )
    ]


def _immutable(new: Mapping[str, Any], old: Mapping[str, Any] | None, kind: str) -> list[Cause]:
    if old is None or new.get("spec") == old.get("spec"):
        return []
    return [
        Cause(
            "spec",
            f"a {kind}'s spec is immutable after creation; create a new {kind} instead",
            CauseType.FORBIDDEN,
        )
    ]


def validate_snapshot(
    snapshot: Mapping[str, Any], old: Mapping[str, Any] | None = None
) -> list[Cause]:
    """A snapshot names a VirtualMachine; its spec is fixed once created (`old` given)."""
    if old is not None:
        return _immutable(snapshot, old, "VirtualMachineSnapshot")
    path = FieldPath("spec")
    spec = as_map(snapshot.get("spec"))
    causes = _vm_reference(as_map(spec.get("source")), path.child("source"), "source")
    causes += _one_of(spec.get("deletionPolicy"), DELETION_POLICIES, path.child("deletionPolicy"))
    deadline = spec.get("failureDeadline")
    if deadline is not None:
        try:
            if parse_duration(str(deadline)) < 0:
                raise DurationError("negative")
        except DurationError:
            causes.append(
                Cause(
                    str(path.child("failureDeadline")),
                    f"'{deadline}' is not a duration of 0 or more (e.g. 5m; 0 means no deadline)",
                )
            )
    return causes


def validate_restore(
    restore: Mapping[str, Any], old: Mapping[str, Any] | None = None
) -> list[Cause]:
    """A restore names a VirtualMachine target and a snapshot; its spec is fixed once made."""
    if old is not None:
        return _immutable(restore, old, "VirtualMachineRestore")
    path = FieldPath("spec")
    spec = as_map(restore.get("spec"))
    causes = _vm_reference(as_map(spec.get("target")), path.child("target"), "target")
    if not as_str(spec.get("virtualMachineSnapshotName")):
        causes.append(
            Cause(
                str(path.child("virtualMachineSnapshotName")),
                "virtualMachineSnapshotName is required: the snapshot to restore from",
                CauseType.REQUIRED,
            )
        )
    causes += _one_of(
        spec.get("targetReadinessPolicy"),
        TARGET_READINESS_POLICIES,
        path.child("targetReadinessPolicy"),
    )
    causes += _one_of(
        spec.get("volumeRestorePolicy"), VOLUME_RESTORE_POLICIES, path.child("volumeRestorePolicy")
    )
    for i, patch in enumerate(spec.get("patches") or ()):
        causes += _patch_causes(patch, path.child("patches").index(i))
    return causes


def _patch_causes(patch: object, path: FieldPath) -> list[Cause]:
    try:
        op = json.loads(str(patch))
    except ValueError as exc:
        return [Cause(str(path), f"not a JSON patch operation: {exc}")]
    if not isinstance(op, Mapping) or op.get("op") not in ("add", "remove", "replace", "test"):
        return [
            Cause(
                str(path),
                'each patch is one JSON patch operation, e.g. {"op": "replace", "path": '
                '"/metadata/name", "value": "new-vm"} (op: add, remove, replace or test)',
            )
        ]
    target = as_str(op.get("path")) or ""
    if target.startswith("/status"):
        return [Cause(str(path), "a patch may not change the status", CauseType.FORBIDDEN)]
    return []
