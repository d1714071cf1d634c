"""Which instancetype and preference a VM names: kinds, resources, VMI annotations.

An empty kind means the cluster-wide kind (upstream's default); kinds match
case-insensitively by singular or plural resource name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from ..resources import (
    VIRTUAL_MACHINE_CLUSTER_INSTANCETYPES,
    VIRTUAL_MACHINE_CLUSTER_PREFERENCES,
    VIRTUAL_MACHINE_INSTANCETYPES,
    VIRTUAL_MACHINE_PREFERENCES,
    Resource,
)
from ..values import as_map, as_str

__all__ = [
    "CLUSTER_INSTANCETYPE_ANNOTATION",
    "CLUSTER_PREFERENCE_ANNOTATION",
    "INSTANCETYPE_ANNOTATION",
    "PREFERENCE_ANNOTATION",
    "Matcher",
    "UnknownKindError",
    "instancetype_matcher",
    "preference_matcher",
    "set_matcher_annotations",
]

INSTANCETYPE_ANNOTATION: Final = "kubevirt.io/instancetype-name"
CLUSTER_INSTANCETYPE_ANNOTATION: Final = "kubevirt.io/cluster-instancetype-name"
PREFERENCE_ANNOTATION: Final = "kubevirt.io/preference-name"
CLUSTER_PREFERENCE_ANNOTATION: Final = "kubevirt.io/cluster-preference-name"

_NAMESPACED: Final = {
    "instancetype": VIRTUAL_MACHINE_INSTANCETYPES,
    "preference": VIRTUAL_MACHINE_PREFERENCES,
}
_CLUSTER: Final = {
    "instancetype": VIRTUAL_MACHINE_CLUSTER_INSTANCETYPES,
    "preference": VIRTUAL_MACHINE_CLUSTER_PREFERENCES,
}


class UnknownKindError(ValueError):
    """A matcher names a kind that is neither the namespaced nor the cluster one."""


@dataclass(frozen=True, slots=True)
class Matcher:
    """A VM's spec.instancetype or spec.preference, with its kind resolved."""

    #: "instancetype" or "preference" (the VM spec field).
    field: str
    name: str
    #: The kind exactly as the VM wrote it ("" when left out).
    kind: str
    #: True for the cluster-wide kind (also when the kind was left out).
    cluster: bool
    revision_name: str
    infer_from_volume: str
    infer_from_volume_failure_policy: str | None

    @property
    def resource(self) -> Resource:
        """Where the named object lives (cluster-scoped or in the VM's namespace)."""
        return (_CLUSTER if self.cluster else _NAMESPACED)[self.field]

    @property
    def annotation(self) -> str:
        """The VMI annotation that names this object."""
        if self.field == "instancetype":
            return CLUSTER_INSTANCETYPE_ANNOTATION if self.cluster else INSTANCETYPE_ANNOTATION
        return CLUSTER_PREFERENCE_ANNOTATION if self.cluster else PREFERENCE_ANNOTATION


def _matcher(vm_spec: Mapping[str, Any], field: str) -> Matcher | None:
    raw = vm_spec.get(field)
    if not isinstance(raw, Mapping):
        return None
    kind = as_str(raw.get("kind")) or ""
    lowered = kind.lower()
    if lowered in ("", _CLUSTER[field].kind.lower(), _CLUSTER[field].plural):
        cluster = True
    elif lowered in (_NAMESPACED[field].kind.lower(), _NAMESPACED[field].plural):
        cluster = False
    else:
        raise UnknownKindError(f"got unexpected kind in {field.capitalize()}Matcher: {kind}")
    policy = as_str(raw.get("inferFromVolumeFailurePolicy"))
    return Matcher(
        field=field,
        name=as_str(raw.get("name")) or "",
        kind=kind,
        cluster=cluster,
        revision_name=as_str(raw.get("revisionName")) or "",
        infer_from_volume=as_str(raw.get("inferFromVolume")) or "",
        infer_from_volume_failure_policy=policy,
    )


def instancetype_matcher(vm: Mapping[str, Any]) -> Matcher | None:
    """The VM's spec.instancetype (None when it names none). Raises UnknownKindError."""
    return _matcher(as_map(vm.get("spec")), "instancetype")


def preference_matcher(vm: Mapping[str, Any]) -> Matcher | None:
    """The VM's spec.preference (None when it names none). Raises UnknownKindError."""
    return _matcher(as_map(vm.get("spec")), "preference")


def set_matcher_annotations(vm: Mapping[str, Any], annotations: dict[str, Any]) -> None:
    """Name the VM's instancetype and preference in a VMI's `annotations` (as upstream)."""
    for matcher in (instancetype_matcher(vm), preference_matcher(vm)):
        if matcher is not None:
            annotations[matcher.annotation] = matcher.name
