"""Volume hotplug, the controller's half: the attachment pod and the early volume phases.

As upstream (`watch/vmi/volume-hotplug.go`, `services/template.go`
`RenderHotplugAttachmentPodTemplate`): a running VMI's hotplugged claims are mounted on its
node by an attachment pod (`hp-volume-*`, owned by the launcher pod, so it goes with it).
One pod holds the whole current set; when the set changes a pod for the new set is made and
the old one deleted once the new one runs and nothing mounted still needs it. virt-handler
then mounts each claim's disk into the launcher (`kubevirt_api.hotplug` has the phases).

Differences: the pod's container also creates a blank filesystem claim's `disk.img` (the
launcher's own sizing rules), since there is no CDI here to have made one. A memoryDump
volume's claim is held as a directory the launcher may write (`--dump-dir`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kube_runtime import JsonPatchOp, RawObject, thaw
from kubevirt_api.enums import PodPhase
from kubevirt_api.hotplug import (
    ATTACHMENT_CONTAINER,
    ATTACHMENT_LABEL_VALUE,
    ATTACHMENT_VOLUMES_ANNOTATION,
    MOUNTED_PHASES,
    VolumePhase,
    attachment_volume_dir,
    hotplug_claims,
    memory_dump_volumes,
)
from kubevirt_api.memorydump import MemoryDumpVolumePhase
from virt_domain.launcher_pod import LAUNCHER_UID

from .claims import Claim, ClaimLookup, claim_info
from .objects import deleting, mapping, meta, owner_ref, phase, uid
from .wellknown import APP_LABEL

__all__ = [
    "AttachmentPlan",
    "attachment_volumes",
    "hotplug_volume_status",
    "plan_attachment",
    "render_attachment_pod",
    "vmi_hotplug_ops",
]

_HOSTNAME_LABEL = "kubernetes.io/hostname"


def attachment_volumes(pod: RawObject) -> tuple[str, ...]:
    """The VMI volumes an attachment pod holds (its annotation), sorted."""
    text = str(mapping(meta(pod).get("annotations")).get(ATTACHMENT_VOLUMES_ANNOTATION) or "")
    return tuple(sorted(v for v in text.split(",") if v))


def render_attachment_pod(
    vmi: RawObject,
    launcher: RawObject,
    claims: Mapping[str, Claim],
    image: str,
    pull_policy: str,
) -> dict[str, Any]:
    """The attachment pod holding `claims` (VMI volume → claim) on the launcher's node."""
    node = str(mapping(launcher.get("spec")).get("nodeName") or "")
    dumps = memory_dump_volumes(mapping(vmi.get("spec")))
    names = sorted(claims)
    volumes: list[dict[str, Any]] = []
    mounts: list[dict[str, Any]] = []
    devices: list[dict[str, Any]] = []
    args: list[str] = []
    for name in names:
        claim = claims[name]
        volumes.append({"name": name, "persistentVolumeClaim": {"claimName": claim.name}})
        if claim.block:
            devices.append({"name": name, "devicePath": attachment_volume_dir(name)})
            continue
        mounts.append({"name": name, "mountPath": attachment_volume_dir(name)})
        if name in dumps:
            args += ["--dump-dir", f"{name}={attachment_volume_dir(name)}"]
            continue
        args += ["--volume", f"{name}={attachment_volume_dir(name)}"]
        args += ["--claim-info", f"{name}={json.dumps(claim_info(claim), sort_keys=True)}"]
    container: dict[str, Any] = {
        "name": ATTACHMENT_CONTAINER,
        "image": image,
        "imagePullPolicy": pull_policy,
        "command": ["python3", "-m", "virt_launcher.attachment"],
        "args": args,
        "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}},
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "runAsNonRoot": True,
        },
        "volumeMounts": mounts,
    }
    if devices:
        container["volumeDevices"] = devices
    m = meta(vmi)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": "hp-volume-",
            "namespace": m.get("namespace"),
            "labels": {APP_LABEL: ATTACHMENT_LABEL_VALUE},
            "annotations": {ATTACHMENT_VOLUMES_ANNOTATION: ",".join(names)},
            "ownerReferences": [owner_ref(launcher, "v1", "Pod")],
        },
        "spec": {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": _HOSTNAME_LABEL, "operator": "In", "values": [node]}
                                ]
                            }
                        ]
                    }
                }
            },
            # The launcher pod runs there already: whatever it tolerates, so must this.
            "tolerations": [{"operator": "Exists"}],
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "terminationGracePeriodSeconds": 1,
            "securityContext": {
                "runAsUser": LAUNCHER_UID,
                "runAsGroup": LAUNCHER_UID,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [container],
            "volumes": volumes,
        },
    }


@dataclass
class AttachmentPlan:
    """What to change about a VMI's attachment pods, and which pod serves each volume."""

    create: dict[str, Any] | None = None
    delete: list[RawObject] = field(default_factory=list)
    #: VMI volume → the running attachment pod that holds it.
    serving: dict[str, RawObject] = field(default_factory=dict)


def _running(pod: RawObject) -> bool:
    return phase(pod) == PodPhase.RUNNING and not deleting(pod)


def _still_mounted(vmi: RawObject, wanted: Mapping[str, Claim]) -> set[str]:
    """Volumes gone from the spec whose disk may still be mounted into the launcher."""
    out = set()
    for entry in mapping(vmi.get("status")).get("volumeStatus") or ():
        entry = mapping(entry)
        name = str(entry.get("name") or "")
        if (
            name not in wanted
            and entry.get("hotplugVolume")
            and entry.get("phase") in MOUNTED_PHASES
        ):
            out.add(name)
    return out


def plan_attachment(
    vmi: RawObject,
    launcher: RawObject,
    pods: Sequence[RawObject],
    lookup: ClaimLookup,
    image: str,
    pull_policy: str,
) -> AttachmentPlan:
    """For a running VMI with its launcher pod: the attachment pods to make and delete."""
    namespace = str(meta(vmi).get("namespace") or "")
    wanted: dict[str, Claim] = {}
    for volume, claim_name in hotplug_claims(mapping(vmi.get("spec"))).items():
        claim = lookup(namespace, claim_name)
        if claim is not None:
            wanted[volume] = claim
    plan = AttachmentPlan()
    live = [p for p in pods if not deleting(p)]
    current = next((p for p in live if attachment_volumes(p) == tuple(sorted(wanted))), None)
    if wanted and current is None:
        plan.create = render_attachment_pod(vmi, launcher, wanted, image, pull_policy)
    for pod in sorted(live, key=lambda p: str(meta(p).get("creationTimestamp") or "")):
        if _running(pod):
            for volume in attachment_volumes(pod):
                plan.serving[volume] = pod
    if current is not None and _running(current):
        for volume in attachment_volumes(current):
            plan.serving[volume] = current
    mounted = _still_mounted(vmi, wanted)
    settled = not wanted or (current is not None and _running(current))
    for pod in live:
        if pod is current or not settled:
            continue
        if any(v in mounted for v in attachment_volumes(pod)):
            continue  # the handler still has a disk from it mounted
        plan.delete.append(pod)
    return plan


#: Phases the handler wrote once the volume was in the launcher: the controller keeps them.
_HANDLER_PHASES = frozenset({VolumePhase.MOUNTED_TO_POD, VolumePhase.READY, *MemoryDumpVolumePhase})


def hotplug_volume_status(
    vmi: RawObject,
    entries: list[dict[str, Any]],
    serving: Mapping[str, RawObject],
    lookup: ClaimLookup,
) -> list[dict[str, Any]]:
    """`entries` (volume_status's, one per spec volume) with the hotplugged volumes' phase
    and attachment pod, and the entries of volumes that left the spec while mounted."""
    spec_claims = hotplug_claims(mapping(vmi.get("spec")))
    dumps = memory_dump_volumes(mapping(vmi.get("spec")))
    namespace = str(meta(vmi).get("namespace") or "")
    out: list[dict[str, Any]] = []
    for entry in entries:
        name = str(entry.get("name"))
        claim_name = spec_claims.get(name)
        if claim_name is None:
            out.append(entry)
            continue
        entry = dict(entry)
        if name in dumps:
            # As upstream: the handler adds the dump's file name and times to this.
            entry["memoryDumpVolume"] = {
                **mapping(entry.get("memoryDumpVolume")),
                "claimName": claim_name,
            }
        pod = serving.get(name)
        old_phase = entry.get("phase")
        if pod is not None:
            attach = {"attachPodName": meta(pod).get("name"), "attachPodUID": uid(pod)}
            if old_phase not in _HANDLER_PHASES:
                entry["phase"] = VolumePhase.ATTACHED_TO_NODE
                entry["reason"] = "SuccessfulCreate"
                entry["message"] = (
                    f"Created hotplug attachment pod {attach['attachPodName']}, for volume {name}"
                )
            entry["hotplugVolume"] = attach
        elif old_phase not in _HANDLER_PHASES:
            claim = lookup(namespace, claim_name)
            entry["phase"] = (
                VolumePhase.BOUND
                if claim is not None and claim.phase == "Bound"
                else VolumePhase.PENDING
            )
            entry.pop("reason", None)
            entry.pop("message", None)
        out.append(entry)
    listed = {str(e.get("name")) for e in out}
    for old in mapping(vmi.get("status")).get("volumeStatus") or ():
        old = mapping(old)
        name = str(old.get("name") or "")
        if name in listed or not old.get("hotplugVolume"):
            continue
        if old.get("phase") in MOUNTED_PHASES:
            gone = thaw(old)
            gone["phase"] = VolumePhase.DETACHING
            gone.pop("reason", None)
            gone.pop("message", None)
            out.append(gone)
        # UnMountedFromPod (or never mounted): the entry ends here.
    return sorted(out, key=lambda e: str(e.get("name")))


def _disks(spec: Mapping[str, Any]) -> list[Any]:
    return list(mapping(mapping(spec.get("domain")).get("devices")).get("disks") or ())


def vmi_hotplug_ops(template: Mapping[str, Any], vmi: RawObject) -> list[JsonPatchOp]:
    """JSON-patch ops that bring a running VMI's hotplugged volumes (and their disks) in line
    with its VM's template, as upstream's declarative hotplug: one in the template only is
    added, one in the VMI only is removed; the other volumes are never touched. Each list is
    guarded by a `test` of what it was. [] when nothing differs. memoryDump volumes are the
    memory dump's to add and remove (memorydump.py), not the template's."""
    spec = mapping(vmi.get("spec"))
    wanted = hotplug_claims(template, memory_dump=False)
    have = hotplug_claims(spec, memory_dump=False)
    if wanted == have:
        return []
    template_volumes = {str(mapping(v).get("name")): v for v in template.get("volumes") or ()}
    template_disks = {str(mapping(d).get("name")): d for d in _disks(template)}
    volumes = [thaw(v) for v in spec.get("volumes") or ()]
    disks = [thaw(d) for d in _disks(spec)]
    gone = {name for name in have if name not in wanted or wanted[name] != have[name]}
    volumes = [v for v in volumes if v.get("name") not in gone]
    disks = [d for d in disks if d.get("name") not in gone]
    present = {v.get("name") for v in volumes}
    for name in sorted(wanted):
        if name in present:
            continue
        volumes.append(thaw(template_volumes[name]))
        if name in template_disks:
            disks.append(thaw(template_disks[name]))
    ops: list[JsonPatchOp] = []
    devices = mapping(mapping(spec.get("domain")).get("devices"))
    for path, old, new in (
        ("/spec/volumes", spec.get("volumes"), volumes),
        ("/spec/domain/devices/disks", devices.get("disks"), disks),
    ):
        # Guarded by the list as read: an absent one tests as null, an empty one as [] (the
        # apiserver's json-patch); `add` sets a member whether or not it is there.
        ops.append({"op": "test", "path": path, "value": thaw(old)})
        ops.append({"op": "add", "path": path, "value": new})
    return ops
