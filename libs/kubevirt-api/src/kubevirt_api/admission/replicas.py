"""VirtualMachineInstanceReplicaSet and VirtualMachinePool admission."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..clusterconfig import ClusterConfig
from ..selectors import SelectorError, matches
from ..values import as_int, as_map
from .causes import Cause, CauseType, FieldPath
from .vm import validate_vm_spec
from .vmi import validate_vmi_metadata, validate_vmi_spec

__all__ = ["validate_pool", "validate_replicaset"]


def _check_selector(
    spec: Mapping[str, Any], path: FieldPath, labels: Mapping[str, Any], labels_path: FieldPath
) -> list[Cause]:
    causes: list[Cause] = []
    selector = spec.get("selector")
    if not isinstance(selector, Mapping) or not (
        selector.get("matchLabels") or selector.get("matchExpressions")
    ):
        causes.append(
            Cause(
                str(path.child("selector")),
                "a selector with matchLabels or matchExpressions is required",
                CauseType.REQUIRED,
            )
        )
    elif not _selects(selector, labels, path, causes):
        causes.append(
            Cause(
                str(path.child("selector")),
                f"the selector does not match the labels in {labels_path}; the template must carry "
                "the labels the selector asks for",
            )
        )
    replicas = spec.get("replicas")
    count = as_int(replicas)
    if replicas is not None and (count is None or count < 0):
        causes.append(
            Cause(str(path.child("replicas")), "replicas must be an integer of at least 0")
        )
    return causes


def _selects(
    selector: Mapping[str, Any], labels: Mapping[str, Any], path: FieldPath, causes: list[Cause]
) -> bool:
    """Whether `selector` selects `labels`; an invalid selector is a cause of its own."""
    try:
        return matches(selector, labels, empty_matches_all=True)
    except SelectorError as error:
        where, _, what = str(error).partition(": ")  # "selector.matchExpressions[0].key: ..."
        causes.append(Cause(f"{path}.{where}", what))
        return True  # one cause for one selector


def validate_replicaset(rs: Mapping[str, Any], config: ClusterConfig) -> list[Cause]:
    """A replica set's VMI template is a valid VMI and its selector matches it."""
    path = FieldPath("spec")
    spec = as_map(rs.get("spec"))
    template = spec.get("template")
    tpath = path.child("template")
    if not isinstance(template, Mapping):
        return [
            Cause(
                str(tpath),
                "a VirtualMachineInstanceReplicaSet needs a template",
                CauseType.REQUIRED,
            )
        ]
    metadata = as_map(template.get("metadata"))
    causes = _check_selector(
        spec, path, as_map(metadata.get("labels")), tpath.child("metadata", "labels")
    )
    causes.extend(validate_vmi_spec(template.get("spec"), tpath.child("spec"), config))
    causes.extend(validate_vmi_metadata(metadata, tpath.child("metadata"), config, trusted=True))
    return causes


def validate_pool(pool: Mapping[str, Any], config: ClusterConfig) -> list[Cause]:
    """A pool's VM template is a valid VM and its selector matches it."""
    path = FieldPath("spec")
    spec = as_map(pool.get("spec"))
    template = spec.get("virtualMachineTemplate")
    tpath = path.child("virtualMachineTemplate")
    if not isinstance(template, Mapping):
        return [
            Cause(
                str(tpath),
                "a VirtualMachinePool needs a virtualMachineTemplate",
                CauseType.REQUIRED,
            )
        ]
    metadata = as_map(template.get("metadata"))
    causes = _check_selector(
        spec, path, as_map(metadata.get("labels")), tpath.child("metadata", "labels")
    )
    causes.extend(validate_vm_spec(template.get("spec"), tpath.child("spec"), config))
    return causes
