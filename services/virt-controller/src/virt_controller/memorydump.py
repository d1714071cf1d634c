"""Memory dumps, the VM controller's half: the dump volume in and out, the request's phase.

As upstream (`pkg/storage/memorydump`): virt-api's `memorydump` subresource sets the VM's
`status.memoryDumpRequest` to Associating. While the VMI runs, the claim is added as a
`memoryDump` volume to the VM's template and to the VMI (the hotplug machinery mounts it
and virt-handler dumps into it); the request goes InProgress, then Unmounting once the
VMI's volume reports MemoryDumpCompleted (the claim is annotated with the file's name and
the volume taken out of the VMI), then Completed once the volume's status entry is gone.
`removememorydump` (Dissociating) takes the volume out of the template too, and the
request ends. Phases and names: `kubevirt_api.memorydump`.

Pure functions over raw objects; vm.py does the writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kube_runtime import JsonPatchOp, RawObject, thaw
from kubevirt_api.enums import VirtualMachineInstancePhase as Phase
from kubevirt_api.memorydump import MemoryDumpPhase, MemoryDumpVolumePhase

from .objects import deleting, mapping, phase

__all__ = [
    "FAILED_ANNOTATION",
    "claim_annotation",
    "dump_volume",
    "next_request",
    "template_volume_ops",
    "vmi_volume_ops",
    "without_dump_volume",
]

#: The claim's annotation after a failed dump (upstream's).
FAILED_ANNOTATION = "Memory dump failed"


def dump_volume(claim: str) -> dict[str, Any]:
    """The volume a dump request adds: named after its claim, as upstream."""
    return {"name": claim, "memoryDump": {"claimName": claim, "hotpluggable": True}}


def _names(volumes: Any) -> set[str]:
    return {str(mapping(v).get("name")) for v in volumes or ()}


def _volume_ops(path: str, old: Any, new: list[Any]) -> list[JsonPatchOp]:
    """Set the list at `path`, guarded by what it was: `old` as read, None when absent (the
    apiserver's json-patch tests a missing member as null, and an empty list as [])."""
    return [
        {"op": "test", "path": path, "value": thaw(old)},
        {"op": "add", "path": path, "value": new},
    ]


def _running(vmi: RawObject | None) -> bool:
    return vmi is not None and not deleting(vmi) and phase(vmi) == Phase.RUNNING


def without_dump_volume(spec: Mapping[str, Any], claim: str) -> dict[str, Any]:
    """A copy of a (VMI) spec without the dump volume named `claim`."""
    out = dict(thaw(spec))
    out["volumes"] = [v for v in out.get("volumes") or () if mapping(v).get("name") != claim]
    return out


def template_volume_ops(
    request: Mapping[str, Any], template_spec: Mapping[str, Any], vmi: RawObject | None
) -> list[JsonPatchOp]:
    """Ops on the VM (paths under /spec/template/spec): add the dump volume while the VMI
    runs and the request is Associating; take it out when the request is Dissociating."""
    claim = str(request.get("claimName") or "")
    old = template_spec.get("volumes")
    volumes = list(old or ())
    present = claim in _names(volumes)
    path = "/spec/template/spec/volumes"
    request_phase = request.get("phase")
    if request_phase == MemoryDumpPhase.ASSOCIATING and _running(vmi) and not present:
        return _volume_ops(path, old, [*map(thaw, volumes), dump_volume(claim)])
    if request_phase == MemoryDumpPhase.DISSOCIATING and present:
        kept = [thaw(v) for v in volumes if mapping(v).get("name") != claim]
        return _volume_ops(path, old, kept)
    return []


def vmi_volume_ops(request: Mapping[str, Any], vmi: RawObject | None) -> list[JsonPatchOp]:
    """Ops on the VMI: add the dump volume (Associating, running); remove it once the dump
    is done or failed, or the request is being removed."""
    if vmi is None or deleting(vmi):
        return []
    claim = str(request.get("claimName") or "")
    old = mapping(vmi.get("spec")).get("volumes")
    volumes = list(old or ())
    present = claim in _names(volumes)
    request_phase = request.get("phase")
    if request_phase == MemoryDumpPhase.ASSOCIATING and _running(vmi) and not present:
        return _volume_ops("/spec/volumes", old, [*map(thaw, volumes), dump_volume(claim)])
    if present and request_phase in (
        MemoryDumpPhase.UNMOUNTING,
        MemoryDumpPhase.FAILED,
        MemoryDumpPhase.DISSOCIATING,
    ):
        kept = [thaw(v) for v in volumes if mapping(v).get("name") != claim]
        return _volume_ops("/spec/volumes", old, kept)
    return []


def _volume_status(vmi: RawObject | None, claim: str) -> Mapping[str, Any] | None:
    if vmi is None:
        return None
    for entry in mapping(vmi.get("status")).get("volumeStatus") or ():
        if mapping(entry).get("name") == claim:
            return mapping(entry)
    return None


def next_request(
    request: Mapping[str, Any] | None,
    template_spec: Mapping[str, Any],
    vmi: RawObject | None,
) -> dict[str, Any] | None:
    """The request as it should be now (upstream's UpdateRequest); None: it has ended."""
    if request is None:
        return None
    out = dict(thaw(request))
    claim = str(request.get("claimName") or "")
    if request.get("remove"):
        out["phase"] = MemoryDumpPhase.DISSOCIATING
    entry = _volume_status(vmi, claim)
    in_template = claim in _names(template_spec.get("volumes"))
    match request.get("phase"):
        case MemoryDumpPhase.COMPLETED:
            return out  # until the next request through the subresource
        case MemoryDumpPhase.ASSOCIATING if in_template:
            out["phase"] = MemoryDumpPhase.IN_PROGRESS
        case MemoryDumpPhase.IN_PROGRESS if entry is not None:
            info = mapping(entry.get("memoryDumpVolume"))
            if not info:
                return out
            if info.get("startTimestamp"):
                out["startTimestamp"] = info["startTimestamp"]
            if entry.get("phase") == MemoryDumpVolumePhase.COMPLETED:
                out["phase"] = MemoryDumpPhase.UNMOUNTING
                out["fileName"] = info.get("targetFileName")
                if info.get("endTimestamp"):
                    out["endTimestamp"] = info["endTimestamp"]
            elif entry.get("phase") == MemoryDumpVolumePhase.FAILED:
                out["phase"] = MemoryDumpPhase.FAILED
                if entry.get("message"):
                    out["message"] = entry["message"]
                if info.get("endTimestamp"):
                    out["endTimestamp"] = info["endTimestamp"]
        case MemoryDumpPhase.UNMOUNTING if entry is None:
            out["phase"] = MemoryDumpPhase.COMPLETED
        case MemoryDumpPhase.DISSOCIATING if entry is None and not in_template:
            return None
    return out


def claim_annotation(request: Mapping[str, Any] | None) -> str | None:
    """What the claim's `kubevirt.io/memory-dump` annotation should say, or None (leave it):
    the dump's file once it is written, or that it failed."""
    if request is None:
        return None
    if request.get("phase") == MemoryDumpPhase.UNMOUNTING and request.get("fileName"):
        return str(request["fileName"])
    if request.get("phase") == MemoryDumpPhase.FAILED:
        return FAILED_ANNOTATION
    return None
