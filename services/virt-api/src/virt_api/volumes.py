"""Volume hotplug (addvolume/removevolume) as upstream's pkg/virt-api/rest/volumes.go.

Pure: reading the options body and planning the JSON patch of a VMI spec (or of a VM's
template spec). The patch replaces the volume and disk lists whole behind `test`s of
their current values, so a concurrent change fails the patch (409) instead of being lost.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kube_runtime import JsonPatchOp
from kubevirt_api.admission import FieldPath, check_hotplug_disk
from kubevirt_api.admission.storage import DATA_VOLUME_UNSUPPORTED
from kubevirt_api.hotplug import is_hotplug_volume

from .lifecycle import Conflict, Invalid

__all__ = [
    "NO_BODY",
    "AddVolume",
    "RemoveVolume",
    "parse_add_volume",
    "parse_remove_volume",
    "plan_add_volume",
    "plan_remove_volume",
]

#: upstream's 400 for a call without options.
NO_BODY = "Request with no body, a new name is expected as the request body"


@dataclass(frozen=True, slots=True)
class AddVolume:
    """A volume to plug: its name, its disk (named after it) and its claim."""

    name: str
    disk: Mapping[str, Any]
    claim: Mapping[str, Any]

    def volume(self) -> dict[str, Any]:
        """The volume as the VMI spec carries it: the claim marked hotpluggable."""
        return {"name": self.name, "persistentVolumeClaim": {**self.claim, "hotpluggable": True}}


@dataclass(frozen=True, slots=True)
class RemoveVolume:
    """A volume to unplug, by its name (or its claim's name, as upstream matches)."""

    name: str


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def parse_add_volume(body: Mapping[str, Any]) -> AddVolume | Invalid:
    """AddVolumeOptions {name, disk, volumeSource{persistentVolumeClaim}}; a 400 names the
    field (a dataVolume source is refused: DataVolumes need CDI, which is absent)."""
    name = body.get("name")
    if not name:
        return Invalid("AddVolumeOptions requires name to be set")
    if not isinstance(name, str):
        return Invalid("name must be a string")
    disk = body.get("disk")
    if disk is None:
        return Invalid("AddVolumeOptions requires disk to not be nil")
    if not isinstance(disk, Mapping):
        return Invalid("disk must be an object")
    source = body.get("volumeSource")
    if source is None:
        return Invalid("AddVolumeOptions requires VolumeSource to not be nil")
    if not isinstance(source, Mapping):
        return Invalid("volumeSource must be an object")
    if "dataVolume" in source:
        return Invalid(f"volumeSource.dataVolume: {DATA_VOLUME_UNSUPPORTED}")
    kinds = sorted(source)
    if kinds != ["persistentVolumeClaim"]:
        found = ", ".join(kinds) or "none"
        return Invalid(
            f"volumeSource must set exactly persistentVolumeClaim (found {found}); "
            "the claim is hot-plugged as it is"
        )
    claim = source["persistentVolumeClaim"]
    if not isinstance(claim, Mapping):
        return Invalid("volumeSource.persistentVolumeClaim must be an object")
    claim_name = claim.get("claimName")
    if not claim_name or not isinstance(claim_name, str):
        return Invalid("volumeSource.persistentVolumeClaim.claimName is required")
    if "readOnly" in claim and not isinstance(claim["readOnly"], bool):
        return Invalid("volumeSource.persistentVolumeClaim.readOnly must be a boolean")
    named = {**disk, "name": name}  # upstream names the disk after the volume
    causes = check_hotplug_disk(named, name, FieldPath("disk"), "AddVolume request")
    if causes:
        return Invalid("; ".join(str(c) for c in causes))
    return AddVolume(name, named, {k: v for k, v in claim.items() if k != "hotpluggable"})


def parse_remove_volume(body: Mapping[str, Any]) -> RemoveVolume | Invalid:
    """RemoveVolumeOptions {name}."""
    name = body.get("name")
    if not name:
        return Invalid("RemoveVolumeOptions requires name to be set")
    if not isinstance(name, str):
        return Invalid("name must be a string")
    return RemoveVolume(name)


def _lists(spec: Mapping[str, Any]) -> tuple[list[Any], list[Any], bool]:
    """The spec's volumes, its disks, and whether spec.domain.devices exists."""
    volumes = spec.get("volumes")
    domain = _map(spec.get("domain"))
    devices = domain.get("devices")
    disks = _map(devices).get("disks")
    return (
        list(volumes) if isinstance(volumes, list) else [],
        list(disks) if isinstance(disks, list) else [],
        isinstance(devices, Mapping),
    )


def _claim_name(volume: Mapping[str, Any]) -> object:
    return _map(volume.get("persistentVolumeClaim")).get("claimName") or _map(
        volume.get("dataVolume")
    ).get("name")


def _patch(
    prefix: str,
    spec: Mapping[str, Any],
    volumes: list[Any],
    disks: list[Any],
) -> list[JsonPatchOp]:
    """Replace the two lists, each behind a test of what it was (null when absent: a JSON
    patch test of a missing member against null passes, as upstream relies on)."""
    has_devices = _lists(spec)[2]
    volumes_path = f"{prefix}/spec/volumes"
    devices_path = f"{prefix}/spec/domain/devices"
    ops: list[JsonPatchOp] = [
        {"op": "test", "path": volumes_path, "value": spec.get("volumes")},
        {"op": "replace" if "volumes" in spec else "add", "path": volumes_path, "value": volumes},
    ]
    if not has_devices:
        ops.append({"op": "test", "path": devices_path, "value": None})
        ops.append({"op": "add", "path": devices_path, "value": {"disks": disks}})
        return ops
    devices = _map(_map(spec.get("domain")).get("devices"))
    ops.append({"op": "test", "path": f"{devices_path}/disks", "value": devices.get("disks")})
    ops.append(
        {
            "op": "replace" if "disks" in devices else "add",
            "path": f"{devices_path}/disks",
            "value": disks,
        }
    )
    return ops


def plan_add_volume(
    spec: Mapping[str, Any], prefix: str, request: AddVolume
) -> list[JsonPatchOp] | Conflict:
    """The patch adding the volume and its disk to `spec` (at `prefix`: "" for a VMI,
    "/spec/template" for a VM); a Conflict with upstream's words when the name or the
    claim is already used."""
    volumes, disks, _ = _lists(spec)
    claim = request.claim.get("claimName")
    for raw in volumes:
        volume = _map(raw)
        if volume.get("name") == request.name:
            return Conflict(
                f"Unable to add volume [{request.name}] because volume with that name already exists"
            )
        if _claim_name(volume) == claim:
            return Conflict(f"Unable to add volume source [{claim}] because it already exists")
    if any(_map(d).get("name") == request.name for d in disks):
        return Conflict(
            f"Unable to add volume [{request.name}] because a disk with that name already exists"
        )
    return _patch(prefix, spec, [*volumes, request.volume()], [*disks, dict(request.disk)])


def plan_remove_volume(
    spec: Mapping[str, Any], prefix: str, request: RemoveVolume
) -> list[JsonPatchOp] | Conflict:
    """The patch removing the hotplug volume named (or whose claim is named) and its disk;
    a Conflict with upstream's words when there is none or it is not hotpluggable."""
    volumes, disks, _ = _lists(spec)
    found = next(
        (_map(v) for v in volumes if request.name in (_map(v).get("name"), _claim_name(_map(v)))),
        None,
    )
    if found is None:
        return Conflict(f"Unable to remove volume [{request.name}] because it does not exist")
    name = found.get("name")
    if not is_hotplug_volume(found) or "memoryDump" in found:
        return Conflict(f"Unable to remove volume [{name}] because it is not hotpluggable")
    return _patch(
        prefix,
        spec,
        [v for v in volumes if _map(v).get("name") != name],
        [d for d in disks if _map(d).get("name") != name],
    )
