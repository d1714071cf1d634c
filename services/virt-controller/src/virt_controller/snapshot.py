"""The VM snapshot controller: VirtualMachineSnapshots, their contents, and the VM's lock.

A snapshot locks its VM (``status.snapshotInProgress`` and a finalizer), captures the VM
in a VirtualMachineSnapshotContent, and reports ``Succeeded`` once the content is ready,
then unlocks the VM. Volumes are backed up by CSI VolumeSnapshots upstream; this cluster
has no snapshot-capable storage (no VolumeSnapshotClass), so every volume is listed as
excluded and the content holds the VM definition only: upstream's path for a VM whose
volumes cannot be snapshotted. The same controller keeps each VM's
``status.volumeSnapshotStatuses`` (which volumes could be snapshotted, and why not).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import structlog
from kube_runtime import (
    VIRTUAL_MACHINES,
    ApiError,
    Event,
    EventRecorder,
    KubeClient,
    RawObject,
    SharedInformer,
    WorkQueue,
    thaw,
)
from kubevirt_api.durations import parse_duration
from kubevirt_api.resources import VIRTUAL_MACHINE_SNAPSHOT_CONTENTS, VIRTUAL_MACHINE_SNAPSHOTS

from .objects import condition, deleting, format_time, mapping, meta, parse_time, uid
from .objects import upsert_condition as _upsert
from .writes import patch_status_if_changed, set_finalizer, set_vm_status_field

__all__ = [
    "CONTENT_FINALIZER",
    "DEFAULT_FAILURE_DEADLINE",
    "SNAPSHOT_FINALIZER",
    "SOURCE_FINALIZER",
    "SOURCE_INDEX",
    "SnapshotController",
    "content_name",
    "index_by_source",
    "volume_snapshot_statuses",
]

log = structlog.get_logger(__name__)

SNAPSHOT_FINALIZER: Final = "snapshot.kubevirt.io/vmsnapshot-protection"
CONTENT_FINALIZER: Final = "snapshot.kubevirt.io/vmsnapshotcontent-protection"
#: On the VM while a snapshot holds it.
SOURCE_FINALIZER: Final = "snapshot.kubevirt.io/snapshot-source-protection"
DEFAULT_FAILURE_DEADLINE: Final = dt.timedelta(minutes=5)
#: How often a snapshot waiting for its VM's lock looks again.
LOCK_RETRY: Final = 5.0
#: Snapshots by the key of the VM they snapshot.
SOURCE_INDEX: Final = "snapshot-source"

_SNAPSHOT_API: Final = "snapshot.kubevirt.io/v1beta1"
_CONTENT_CREATED: Final = "SuccessfulVirtualMachineSnapshotContentCreate"
_DEADLINE_EXCEEDED: Final = "snapshot deadline exceeded"

# What each indication means, written into status.sourceIndications.
_INDICATIONS: Final = {
    "Online": "Snapshot was taken while the VM was running",
    "GuestAgent": "The guest agent froze the guest's filesystems for the snapshot",
    "NoGuestAgent": "No guest agent was connected: the snapshot is crash-consistent",
}


def content_name(snapshot: RawObject) -> str:
    """The content's name: the one in status, else upstream's `vmsnapshot-content-<uid>`."""
    named = mapping(snapshot.get("status")).get("virtualMachineSnapshotContentName")
    return str(named) if named else f"vmsnapshot-content-{uid(snapshot)}"


def index_by_source(snapshot: RawObject) -> list[str]:
    """SOURCE_INDEX: the `namespace/name` of the VM a snapshot names."""
    source = mapping(mapping(snapshot.get("spec")).get("source"))
    if source.get("kind") != "VirtualMachine" or not source.get("name"):
        return []
    return [f"{meta(snapshot).get('namespace')}/{source['name']}"]


def volume_snapshot_statuses(vm: RawObject) -> list[dict[str, Any]]:
    """`status.volumeSnapshotStatuses` for `vm`: one per volume, none enabled here.

    Only claim-backed volumes (persistentVolumeClaim, dataVolume, memoryDump) can be
    snapshotted upstream, and only when their StorageClass has a VolumeSnapshotClass;
    this cluster has none (no CSI snapshot support), which the reason says.
    """
    template = mapping(mapping(vm.get("spec")).get("template"))
    out: list[dict[str, Any]] = []
    for volume in mapping(template.get("spec")).get("volumes") or ():
        volume = mapping(volume)
        name = str(volume.get("name") or "")
        if any(k in volume for k in ("persistentVolumeClaim", "dataVolume", "memoryDump")):
            reason = (
                "No VolumeSnapshotClass: volume snapshots are not configured for this "
                f"StorageClass [{name}] (the cluster has no CSI snapshot support)"
            )
        else:
            reason = f"Snapshot is not supported for this volumeSource type [{name}]"
        out.append({"name": name, "enabled": False, "reason": reason})
    return out


def _progressing(snapshot: RawObject) -> bool:
    status = mapping(snapshot.get("status"))
    return (
        status.get("error") is None
        and status.get("readyToUse") is not True
        and status.get("phase") not in ("Succeeded", "Failed")
    )


def _delete_content(snapshot: RawObject, content: RawObject) -> bool:
    """Upstream's rule: the policy says Delete (the default), or the content never got ready."""
    policy = mapping(snapshot.get("spec")).get("deletionPolicy") or "Delete"
    return policy == "Delete" or mapping(content.get("status")).get("readyToUse") is not True


class SnapshotController:
    """Reconciles VirtualMachineSnapshots (and their contents) by the snapshot's key."""

    def __init__(
        self,
        client: KubeClient,
        snapshots: SharedInformer[RawObject],
        contents: SharedInformer[RawObject],
        vms: SharedInformer[RawObject],
        vmis: SharedInformer[RawObject],
        queue: WorkQueue[str],
        *,
        recorder: EventRecorder | None = None,
        now: Callable[[], dt.datetime] | None = None,
    ) -> None:
        self.client = client
        self.snapshots = snapshots
        self.contents = contents
        self.vms = vms
        self.vmis = vmis
        self.queue = queue
        self.recorder = recorder
        self.now = now or (lambda: dt.datetime.now(dt.UTC))

    # -- events ------------------------------------------------------------------------

    def on_snapshot(self, event: Event[RawObject]) -> None:
        self.queue.add(event.key)

    def on_content(self, event: Event[RawObject]) -> None:
        name = mapping(event.raw.get("spec")).get("virtualMachineSnapshotName")
        if name:
            self.queue.add(f"{meta(event.raw).get('namespace')}/{name}")

    def on_vm(self, event: Event[RawObject]) -> None:
        self.queue.add(f"vm:{event.key}")
        for snapshot in self.snapshots.store.by_index(SOURCE_INDEX, event.key):
            self.queue.add(f"{meta(snapshot).get('namespace')}/{meta(snapshot).get('name')}")

    def on_vmi(self, event: Event[RawObject]) -> None:
        # Online and guest-agent indications follow the VMI.
        for snapshot in self.snapshots.store.by_index(SOURCE_INDEX, event.key):
            if _progressing(snapshot):
                self.queue.add(f"{meta(snapshot).get('namespace')}/{meta(snapshot).get('name')}")

    # -- reconcile ---------------------------------------------------------------------

    async def reconcile(self, key: str) -> None:
        if key.startswith("vm:"):
            await self._sync_vm_volume_statuses(key.removeprefix("vm:"))
            return
        snapshot = self.snapshots.get_raw(key)
        if snapshot is None:
            return
        namespace = str(meta(snapshot).get("namespace"))
        vm = self._source_vm(snapshot)
        content = self.contents.get_raw(f"{namespace}/{content_name(snapshot)}")
        now = self.now()
        failed = self._deadline_exceeded(snapshot, now)
        progressing = _progressing(snapshot) and not failed
        terminating = deleting(snapshot) or failed
        if content is not None and not deleting(content):
            content = await self._sync_content(snapshot, content, now)
        if vm is not None:
            if progressing and not deleting(snapshot):
                if not self._locked_by(vm, snapshot):
                    await self._lock(vm, snapshot)
                elif content is None:
                    await self._create_content(snapshot, vm)
            elif not progressing or (
                terminating and (content is None or not _delete_content(snapshot, content))
            ):
                await self._unlock(vm, snapshot)
        if terminating and content is not None and _delete_content(snapshot, content):
            await self._remove_content(content)
        if deleting(snapshot):
            gone = content is None or not _delete_content(snapshot, content)
            if (not progressing or gone) and (vm is None or not self._locked_by(vm, snapshot)):
                await set_finalizer(
                    self.client, VIRTUAL_MACHINE_SNAPSHOTS, snapshot, SNAPSHOT_FINALIZER, False
                )
            return
        await set_finalizer(
            self.client, VIRTUAL_MACHINE_SNAPSHOTS, snapshot, SNAPSHOT_FINALIZER, True
        )
        await self._patch_status(snapshot, vm, content, failed, now)
        if progressing:
            remaining = self._deadline(snapshot, now)
            if remaining is not None:
                self.queue.add_after(key, max(remaining, 0.0) + 0.5)
            if vm is not None and not self._locked_by(vm, snapshot):
                self.queue.add_after(key, LOCK_RETRY)

    def _source_vm(self, snapshot: RawObject) -> RawObject | None:
        (source_key, *_) = [*index_by_source(snapshot), ""]
        return self.vms.get_raw(source_key) if source_key else None

    @staticmethod
    def _locked_by(vm: RawObject, snapshot: RawObject) -> bool:
        held = mapping(vm.get("status")).get("snapshotInProgress")
        return held == meta(snapshot).get("name")

    def _deadline(self, snapshot: RawObject, now: dt.datetime) -> float | None:
        """Seconds left before the failure deadline (None: no deadline applies)."""
        spec = mapping(snapshot.get("spec"))
        created = parse_time(meta(snapshot).get("creationTimestamp"))
        if created is None:
            return None
        raw = spec.get("failureDeadline")
        try:
            deadline = (
                dt.timedelta(seconds=parse_duration(str(raw)))
                if raw is not None
                else DEFAULT_FAILURE_DEADLINE
            )
        except ValueError:
            deadline = DEFAULT_FAILURE_DEADLINE
        if deadline <= dt.timedelta(0):
            return None  # 0 disables it, as upstream
        return (created + deadline - now).total_seconds()

    def _deadline_exceeded(self, snapshot: RawObject, now: dt.datetime) -> bool:
        status = mapping(snapshot.get("status"))
        if status.get("phase") == "Failed":
            return True
        if status.get("phase") != "InProgress" or not _progressing(snapshot):
            return False
        remaining = self._deadline(snapshot, now)
        return remaining is not None and remaining < 0

    async def _lock(self, vm: RawObject, snapshot: RawObject) -> None:
        """Take the VM for this snapshot, unless a restore or another snapshot holds it."""
        status = mapping(vm.get("status"))
        if status.get("restoreInProgress") or status.get("snapshotInProgress"):
            return
        name = meta(snapshot)["name"]
        if not await set_vm_status_field(self.client, vm, "snapshotInProgress", name):
            return
        await set_finalizer(self.client, VIRTUAL_MACHINES, vm, SOURCE_FINALIZER, True)
        log.info("source locked", vm=f"{meta(vm)['namespace']}/{meta(vm)['name']}", snapshot=name)

    async def _unlock(self, vm: RawObject, snapshot: RawObject) -> None:
        if not self._locked_by(vm, snapshot):
            return
        m = meta(vm)
        name = meta(snapshot)["name"]
        await set_vm_status_field(self.client, vm, "snapshotInProgress", None, expected=name)
        others = [
            s
            for s in self.snapshots.store.by_index(SOURCE_INDEX, f"{m['namespace']}/{m['name']}")
            if uid(s) != uid(snapshot) and _progressing(s) and not deleting(s)
        ]
        if not others:
            await set_finalizer(self.client, VIRTUAL_MACHINES, vm, SOURCE_FINALIZER, False)

    async def _create_content(self, snapshot: RawObject, vm: RawObject) -> None:
        m = meta(snapshot)
        body = {
            "apiVersion": _SNAPSHOT_API,
            "kind": "VirtualMachineSnapshotContent",
            "metadata": {
                "name": content_name(snapshot),
                "namespace": m["namespace"],
                "finalizers": [CONTENT_FINALIZER],
            },
            "spec": {
                "virtualMachineSnapshotName": m["name"],
                "source": {"virtualMachine": _captured_vm(vm)},
                # No volume can be snapshotted here (no VolumeSnapshotClass): none backed up.
                "volumeBackups": [],
            },
        }
        try:
            await self.client.create(VIRTUAL_MACHINE_SNAPSHOT_CONTENTS, body)
        except ApiError as exc:
            if exc.status != 409:
                raise
            return
        if self.recorder is not None:
            await self.recorder.event(
                snapshot,
                "Normal",
                _CONTENT_CREATED,
                f"Successfully created VirtualMachineSnapshotContent {content_name(snapshot)}",
            )

    async def _sync_content(
        self, snapshot: RawObject, content: RawObject, now: dt.datetime
    ) -> RawObject:
        """The content's own status: with no VolumeSnapshots to wait for, it is created and
        ready on its first pass. Returns the content as it now is."""
        backups = mapping(content.get("spec")).get("volumeBackups") or ()
        status = mapping(content.get("status"))
        if backups:
            # Written by something else (no VolumeSnapshot API here): never ready.
            wanted: dict[str, Any] = {
                "readyToUse": False,
                "error": {
                    "time": mapping(status.get("error")).get("time") or format_time(now),
                    "message": "VolumeSnapshots cannot be made: the cluster has no "
                    "snapshot.storage.k8s.io API (no CSI snapshot support)",
                },
            }
        else:
            wanted = {
                "readyToUse": True,
                "creationTime": status.get("creationTime") or format_time(now),
                "volumeSnapshotStatus": [],
            }
        await patch_status_if_changed(
            self.client, VIRTUAL_MACHINE_SNAPSHOT_CONTENTS, content, wanted
        )
        merged = dict(thaw(content))
        merged["status"] = {**thaw(status), **wanted}
        return merged

    async def _remove_content(self, content: RawObject) -> None:
        await set_finalizer(
            self.client, VIRTUAL_MACHINE_SNAPSHOT_CONTENTS, content, CONTENT_FINALIZER, False
        )
        if deleting(content):
            return
        m = meta(content)
        try:
            await self.client.delete(
                VIRTUAL_MACHINE_SNAPSHOT_CONTENTS, str(m["name"]), str(m["namespace"])
            )
        except ApiError as exc:
            if not exc.not_found:
                raise

    async def _patch_status(
        self,
        snapshot: RawObject,
        vm: RawObject | None,
        content: RawObject | None,
        failed: bool,
        now: dt.datetime,
    ) -> None:
        status = mapping(snapshot.get("status"))
        wanted: dict[str, Any] = {}
        if "readyToUse" not in status:
            wanted["readyToUse"] = False
        if vm is not None:
            wanted["sourceUID"] = uid(vm)
        content_status = mapping(content.get("status")) if content is not None else {}
        if content is not None and content_status:
            wanted["virtualMachineSnapshotContentName"] = meta(content)["name"]
            for name in ("creationTime", "readyToUse", "error"):
                if name in content_status:
                    wanted[name] = thaw(content_status[name])
        view = {**thaw(status), **wanted}
        conditions = [thaw(c) for c in status.get("conditions") or ()]

        def cond(kind: str, value: str, reason: str) -> None:
            nonlocal conditions
            conditions = _upsert(conditions, kind, value, now, reason=reason)

        if failed:
            wanted["phase"] = "Failed"
            cond("Progressing", "False", _DEADLINE_EXCEEDED)
            cond("Failure", "True", _DEADLINE_EXCEEDED)
        elif view.get("error") is None and view.get("readyToUse") is not True:
            wanted["phase"] = "InProgress"
            if vm is not None:
                locked = self._locked_by(vm, snapshot)
                cond(
                    "Progressing",
                    "True" if locked else "False",
                    "Source locked and operation in progress" if locked else "Source not locked",
                )
                indications = self._indications(vm)
                wanted["indications"] = indications
                wanted["sourceIndications"] = [
                    {"indication": i, "message": _INDICATIONS[i]} for i in indications
                ]
            else:
                cond("Progressing", "False", "Source does not exist")
            cond("Ready", "False", "Not ready")
        elif view.get("error") is not None:
            cond("Progressing", "False", "In error state")
            cond("Ready", "False", "Error")
        else:
            wanted["phase"] = "Succeeded"
            cond("Progressing", "False", "Operation complete")
            cond("Ready", "True", "Operation complete")
            volumes = _snapshot_volumes(content)
            if volumes is not None:
                wanted["snapshotVolumes"] = volumes
        wanted["conditions"] = conditions
        if wanted.get("indications") == [] and "indications" not in status:
            del wanted["indications"], wanted["sourceIndications"]
        await patch_status_if_changed(self.client, VIRTUAL_MACHINE_SNAPSHOTS, snapshot, wanted)

    def _indications(self, vm: RawObject) -> list[str]:
        m = meta(vm)
        vmi = self.vmis.get_raw(f"{m.get('namespace')}/{m.get('name')}")
        if vmi is None:
            return []
        agent = condition(vmi, "AgentConnected")
        connected = agent is not None and agent.get("status") == "True"
        return ["Online", "GuestAgent" if connected else "NoGuestAgent"]

    async def _sync_vm_volume_statuses(self, vm_key: str) -> None:
        vm = self.vms.get_raw(vm_key)
        if vm is None or deleting(vm):
            return
        statuses = volume_snapshot_statuses(vm)
        current = mapping(vm.get("status")).get("volumeSnapshotStatuses")
        if thaw(current or []) == statuses:
            return
        await set_vm_status_field(self.client, vm, "volumeSnapshotStatuses", statuses or None)


def _captured_vm(vm: RawObject) -> dict[str, Any]:
    """The VM as the content keeps it: identity, labels, annotations, spec and status."""
    m = meta(vm)
    kept = {
        k: thaw(m[k])
        for k in ("name", "namespace", "uid", "generation", "labels", "annotations")
        if m.get(k) not in (None, {}, "")
    }
    annotations = dict(kept.get("annotations") or {})
    annotations.pop("kubectl.kubernetes.io/last-applied-configuration", None)
    if annotations:
        kept["annotations"] = annotations
    else:
        kept.pop("annotations", None)
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": kept,
        "spec": thaw(vm.get("spec") or {}),
        "status": _captured_status(mapping(vm.get("status"))),
    }


def _captured_status(status: Mapping[str, Any]) -> dict[str, Any]:
    # The lock itself is not part of what is restored.
    return {k: thaw(v) for k, v in status.items() if k not in ("snapshotInProgress",)}


def _snapshot_volumes(content: RawObject | None) -> dict[str, list[str]] | None:
    if content is None:
        return None
    spec = mapping(content.get("spec"))
    vm = mapping(mapping(spec.get("source")).get("virtualMachine"))
    template = mapping(mapping(vm.get("spec")).get("template"))
    volumes: Sequence[Any] = mapping(template.get("spec")).get("volumes") or ()
    backed = {mapping(b).get("volumeName") for b in spec.get("volumeBackups") or ()}
    names = [str(mapping(v).get("name")) for v in volumes]
    out: dict[str, list[str]] = {}
    included = [n for n in names if n in backed]
    excluded = [n for n in names if n not in backed]
    if included:
        out["includedVolumes"] = included
    if excluded:
        out["excludedVolumes"] = excluded
    return out
