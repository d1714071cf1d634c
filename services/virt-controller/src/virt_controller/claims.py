"""The PersistentVolumeClaims a VMI's volumes use: what the launcher pod and the VMI's
status need to know about them.

As upstream (`pkg/virt-controller/services/rendervolumes.go`, `watch/vmi/storage.go`):
- a claim in volumeMode Block reaches the launcher as a device at `/dev/<volume>`, any
  other as a mount at `/var/run/kubevirt-private/vmi-disks/<volume>/` (disk.img inside);
- the launcher pod is not created while a claim is missing: the VMI says
  `PVC <ns>/<name> does not exist, waiting for it to appear` (reason FailedPvcNotFound)
  and is retried when the claim appears;
- `status.volumeStatus` lists every volume by name (sorted), with
  `persistentVolumeClaimInfo` (claimName, accessModes, volumeMode, capacity, requests,
  filesystemOverhead) for claim-backed ones. Without CDI upstream's overhead is its
  default, 0.055.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kube_runtime import RawObject, thaw
from kubevirt_api.hotplug import hotplug_claims

from .objects import mapping

__all__ = [
    "DEFAULT_FILESYSTEM_OVERHEAD",
    "PVC_NOT_FOUND_REASON",
    "Claim",
    "ClaimLookup",
    "block_volumes",
    "block_volumes_in_status",
    "claim_info",
    "claim_name",
    "claim_names",
    "missing_claim",
    "volume_status",
]

PVC_NOT_FOUND_REASON = "FailedPvcNotFound"
#: upstream's storagetypes.DefaultFSOverhead, used when CDI (its CDIConfig) is absent.
DEFAULT_FILESYSTEM_OVERHEAD = "0.055"
_BLOCK = "Block"


@dataclass(frozen=True, slots=True)
class Claim:
    """A PVC as the controller reads it (from its informer)."""

    name: str
    volume_mode: str
    access_modes: tuple[str, ...]
    capacity: Mapping[str, str]
    requests: Mapping[str, str]
    #: status.phase: Pending until bound (WaitForFirstConsumer: until a pod uses it), Bound.
    phase: str = ""

    @property
    def block(self) -> bool:
        return self.volume_mode == _BLOCK

    @classmethod
    def from_raw(cls, raw: RawObject) -> Claim:
        spec = mapping(raw.get("spec"))
        return cls(
            name=str(mapping(raw.get("metadata")).get("name") or ""),
            # Filesystem is the API server's default for volumeMode.
            volume_mode=str(spec.get("volumeMode") or "Filesystem"),
            access_modes=tuple(str(m) for m in spec.get("accessModes") or ()),
            capacity={
                k: str(v) for k, v in mapping(mapping(raw.get("status")).get("capacity")).items()
            },
            requests={
                k: str(v)
                for k, v in mapping(mapping(spec.get("resources")).get("requests")).items()
            },
            phase=str(mapping(raw.get("status")).get("phase") or ""),
        )


#: (namespace, claim name) -> the claim, or None when there is none.
ClaimLookup = Callable[[str, str], Claim | None]


def claim_name(volume: Mapping[str, Any]) -> str | None:
    """The claim behind a VMI volume (raw: persistentVolumeClaim, ephemeral's claim,
    dataVolume, memoryDump), or None."""
    pvc = mapping(volume.get("persistentVolumeClaim")) or mapping(volume.get("memoryDump"))
    ephemeral = mapping(mapping(volume.get("ephemeral")).get("persistentVolumeClaim"))
    data_volume = mapping(volume.get("dataVolume"))
    # A DataVolume's claim has its name.
    name = pvc.get("claimName") or ephemeral.get("claimName") or data_volume.get("name")
    return str(name) if name else None


def _volumes(vmi: RawObject) -> list[Mapping[str, Any]]:
    return [mapping(v) for v in mapping(vmi.get("spec")).get("volumes") or ()]


def _namespace(vmi: RawObject) -> str:
    return str(mapping(vmi.get("metadata")).get("namespace") or "")


def claim_names(vmi: RawObject) -> list[str]:
    """The claims a VMI's volumes use, each once, in order."""
    return list(dict.fromkeys(c for v in _volumes(vmi) if (c := claim_name(v)) is not None))


def missing_claim(vmi: RawObject, lookup: ClaimLookup) -> str | None:
    """Upstream's message for the VMI's first claim that does not exist, or None.
    Hotplugged claims do not hold the launcher pod back: they are attached later."""
    namespace = _namespace(vmi)
    later = set(hotplug_claims(mapping(vmi.get("spec"))).values())
    for name in claim_names(vmi):
        if name not in later and lookup(namespace, name) is None:
            return f"PVC {namespace}/{name} does not exist, waiting for it to appear"
    return None


def block_volumes(vmi: RawObject, lookup: ClaimLookup) -> frozenset[str]:
    """The names of the VMI's volumes whose claim is in volumeMode Block."""
    namespace = _namespace(vmi)
    out = set()
    for volume in _volumes(vmi):
        name = claim_name(volume)
        claim = lookup(namespace, name) if name is not None else None
        if claim is not None and claim.block:
            out.add(str(volume.get("name")))
    return frozenset(out)


def block_volumes_in_status(vmi: RawObject) -> frozenset[str]:
    """The volumes `status.volumeStatus` says are Block claims (a migration target's pod
    renders them as the source's was)."""
    return frozenset(
        str(mapping(s).get("name"))
        for s in mapping(vmi.get("status")).get("volumeStatus") or ()
        if mapping(mapping(s).get("persistentVolumeClaimInfo")).get("volumeMode") == _BLOCK
    )


def claim_info(claim: Claim) -> dict[str, Any]:
    """A claim as `persistentVolumeClaimInfo` (volumeStatus, the attachment pod's args)."""
    info: dict[str, Any] = {
        "claimName": claim.name,
        "accessModes": list(claim.access_modes),
        "volumeMode": claim.volume_mode,
        "filesystemOverhead": DEFAULT_FILESYSTEM_OVERHEAD,
    }
    if claim.capacity:
        info["capacity"] = dict(claim.capacity)
    if claim.requests:
        info["requests"] = dict(claim.requests)
    return info


def volume_status(vmi: RawObject, lookup: ClaimLookup) -> list[dict[str, Any]]:
    """`status.volumeStatus` as upstream's controller writes it: one entry per volume,
    sorted by name, keeping what others wrote into an entry (target, phase) and
    refreshing persistentVolumeClaimInfo for claim-backed volumes."""
    current = mapping(vmi.get("status")).get("volumeStatus") or ()
    old = {str(mapping(s).get("name")): thaw(s) for s in current if mapping(s).get("name")}
    namespace = _namespace(vmi)
    out: list[dict[str, Any]] = []
    for volume in _volumes(vmi):
        volume_name = str(volume.get("name") or "")
        # `target` is not omitempty upstream (the handler fills in the guest's device).
        entry: dict[str, Any] = {"target": "", **(old.get(volume_name) or {"name": volume_name})}
        name = claim_name(volume)
        # Upstream reports claim info for persistentVolumeClaim and dataVolume volumes only.
        if name is not None and not volume.get("ephemeral"):
            claim = lookup(namespace, name)
            if claim is not None:
                entry["persistentVolumeClaimInfo"] = claim_info(claim)
        out.append(entry)
    return sorted(out, key=lambda s: str(s["name"]))
