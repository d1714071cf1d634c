"""Inferring a VM's instancetype and preference from a volume (upstream's pkg/instancetype/infer).

A matcher ``{inferFromVolume: <volume>}`` becomes ``{name, kind}`` from the labels
``instancetype.kubevirt.io/default-instancetype(-kind)`` or
``instancetype.kubevirt.io/default-preference(-kind)`` of that volume's
PersistentVolumeClaim; upstream's VM mutating webhook does it on every create and update.
With ``inferFromVolumeFailurePolicy: Ignore`` an *ignorable* failure (a volume type that
cannot be inferred from, a missing label) drops the matcher instead of refusing the VM,
and a successful instancetype inference drops the template's ``domain.memory`` (the
instancetype sets it). A missing volume or PVC is never ignorable.

DataVolume volumes (and the DataSources behind them) need CDI, which kubevirt-py does not
run: they are an ignorable failure that says so. The PVC read is injected (`LabelsOf`).
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from ..admission.causes import Cause, CauseType
from ..values import as_list, as_map, as_str

__all__ = [
    "DEFAULT_INSTANCETYPE_KIND_LABEL",
    "DEFAULT_INSTANCETYPE_LABEL",
    "DEFAULT_PREFERENCE_KIND_LABEL",
    "DEFAULT_PREFERENCE_LABEL",
    "IGNORE",
    "REJECT",
    "InferenceError",
    "LabelsOf",
    "infer_matchers",
    "matcher_causes",
]

DEFAULT_INSTANCETYPE_LABEL: Final = "instancetype.kubevirt.io/default-instancetype"
DEFAULT_INSTANCETYPE_KIND_LABEL: Final = "instancetype.kubevirt.io/default-instancetype-kind"
DEFAULT_PREFERENCE_LABEL: Final = "instancetype.kubevirt.io/default-preference"
DEFAULT_PREFERENCE_KIND_LABEL: Final = "instancetype.kubevirt.io/default-preference-kind"
IGNORE: Final = "Ignore"
REJECT: Final = "Reject"

_LABELS: Final = {
    "instancetype": (DEFAULT_INSTANCETYPE_LABEL, DEFAULT_INSTANCETYPE_KIND_LABEL),
    "preference": (DEFAULT_PREFERENCE_LABEL, DEFAULT_PREFERENCE_KIND_LABEL),
}

#: The labels of the PVC `name` in `namespace`; None when there is no such PVC.
LabelsOf = Callable[[str, str], Awaitable["Mapping[str, str] | None"]]


class InferenceError(ValueError):
    """Inference failed (upstream's message); `ignorable` failures honour the Ignore policy."""

    def __init__(self, message: str, *, ignorable: bool = False) -> None:
        super().__init__(message)
        self.ignorable = ignorable


def matcher_causes(vm: Mapping[str, Any]) -> list[Cause]:
    """Upstream's checks of spec.instancetype and spec.preference ahead of inference
    (its mutator's validate*Matcher)."""
    causes: list[Cause] = []
    spec = as_map(vm.get("spec"))
    for field, kind in (("instancetype", "Instancetype"), ("preference", "Preference")):
        raw = spec.get(field)
        if not isinstance(raw, Mapping):
            continue
        name, infer = as_str(raw.get("name")) or "", as_str(raw.get("inferFromVolume")) or ""
        if not name and not infer:
            causes.append(
                Cause(
                    f"spec.{field}",
                    f"Either Name or InferFromVolume should be provided within the {kind}Matcher",
                    CauseType.NOT_FOUND,
                )
            )
        if infer:
            for key in ("name", "kind"):
                if as_str(raw.get(key)):
                    causes.append(
                        Cause(
                            f"spec.{field}.{key}",
                            f"{key.capitalize()} already set, should be cleared before "
                            "setting inferFromVolume",
                            CauseType.NOT_SUPPORTED,
                        )
                    )
        policy = raw.get("inferFromVolumeFailurePolicy")
        if policy is not None and policy not in (IGNORE, REJECT):
            causes.append(
                Cause(
                    f"spec.{field}.inferFromVolumeFailurePolicy",
                    f"Invalid value '{policy}' for InferFromVolumeFailurePolicy",
                    CauseType.INVALID,
                )
            )
    return causes


async def _from_volume(
    labels_of: LabelsOf, vm: Mapping[str, Any], field: str, volume_name: str
) -> tuple[str, str]:
    namespace = as_str(as_map(vm.get("metadata")).get("namespace")) or ""
    template = as_map(as_map(as_map(vm.get("spec")).get("template")).get("spec"))
    for volume in as_list(template.get("volumes")):
        volume = as_map(volume)
        if volume.get("name") != volume_name:
            continue
        claim = as_map(volume.get("persistentVolumeClaim"))
        if claim:
            claim_name = as_str(claim.get("claimName")) or ""
            labels = await labels_of(claim_name, namespace)
            if labels is None:
                raise InferenceError(f'persistentvolumeclaims "{claim_name}" not found')
            name_label, kind_label = _LABELS[field]
            if name_label not in labels:
                raise InferenceError(
                    f"unable to find required {name_label} label on the volume", ignorable=True
                )
            return labels[name_label], labels.get(kind_label, "")
        if "dataVolume" in volume:
            raise InferenceError(
                f"unable to infer defaults from volume {volume_name}: DataVolumes and "
                "DataSources need CDI (the Containerized Data Importer), which kubevirt-py "
                "does not run; use a persistentVolumeClaim volume",
                ignorable=True,
            )
        raise InferenceError(
            f"unable to infer defaults from volume {volume_name} as type is not supported",
            ignorable=True,
        )
    raise InferenceError(f"unable to find volume {volume_name} to infer defaults")


async def infer_matchers(labels_of: LabelsOf, vm: Mapping[str, Any]) -> Mapping[str, Any]:
    """The VM with its inferFromVolume matchers resolved (`vm` itself when none infers).

    Raises InferenceError for a failure the matcher's policy does not ignore.
    """
    out: dict[str, Any] | None = None
    for field in ("instancetype", "preference"):
        raw = as_map(as_map(vm.get("spec")).get(field))
        volume = as_str(raw.get("inferFromVolume")) or ""
        if not volume:
            continue
        ignore = raw.get("inferFromVolumeFailurePolicy") == IGNORE
        out = out if out is not None else copy.deepcopy(dict(vm))
        try:
            name, kind = await _from_volume(labels_of, vm, field, volume)
        except InferenceError as error:
            if not (error.ignorable and ignore):
                raise
            del out["spec"][field]
            continue
        out["spec"][field] = {"name": name, **({"kind": kind} if kind else {})}
        if ignore and field == "instancetype":
            domain = as_map(as_map(out["spec"].get("template")).get("spec")).get("domain")
            if isinstance(domain, dict):
                domain.pop("memory", None)
    return vm if out is None else out
