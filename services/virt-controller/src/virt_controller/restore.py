"""The VM restore controller: VirtualMachineRestores put a snapshot's VM back.

A restore waits for its snapshot to be ready, then, for a VM that exists, waits until the
VM has no VMI (as `targetReadinessPolicy` says), locks it (`status.restoreInProgress`),
writes the snapshot's spec into it with the annotation `restore.kubevirt.io/lastRestoreUID`
and unlocks it; for a VM that does not exist it creates one from the snapshot (after the
restore's `patches`). No volume is restored: this cluster's snapshots back up none (no
CSI snapshot support), so `status.restores` stays empty, as upstream's for such a VM.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from typing import Any, Final

import structlog
from kube_runtime import (
    VIRTUAL_MACHINES,
    ApiError,
    Event,
    EventRecorder,
    JsonPatchError,
    JsonPatchOp,
    KubeClient,
    RawObject,
    SharedInformer,
    WorkQueue,
    apply_json_patch,
    pointer,
    thaw,
)
from kubevirt_api.resources import VIRTUAL_MACHINE_RESTORES

from .objects import deleting, format_time, mapping, meta, parse_time, uid
from .objects import upsert_condition as _upsert
from .snapshot import content_name
from .writes import patch_status_if_changed, set_finalizer, set_vm_status_field

__all__ = [
    "LAST_RESTORE_ANNOTATION",
    "RESTORE_FINALIZER",
    "RESTORE_SNAPSHOT_INDEX",
    "RESTORE_TARGET_INDEX",
    "TARGET_GRACE_PERIOD",
    "RestoreController",
    "index_by_restore_snapshot",
    "index_by_restore_target",
]

log = structlog.get_logger(__name__)

RESTORE_FINALIZER: Final = "snapshot.kubevirt.io/vmrestore-protection"
LAST_RESTORE_ANNOTATION: Final = "restore.kubevirt.io/lastRestoreUID"
#: How long WaitGracePeriod (the default policy) waits for a running target to stop.
TARGET_GRACE_PERIOD: Final = dt.timedelta(minutes=5)
RESTORE_TARGET_INDEX: Final = "restore-target"
RESTORE_SNAPSHOT_INDEX: Final = "restore-snapshot"

_COMPLETE_EVENT: Final = "VirtualMachineRestoreComplete"
_ERROR_EVENT: Final = "VirtualMachineRestoreError"


def index_by_restore_target(restore: RawObject) -> list[str]:
    """RESTORE_TARGET_INDEX: the `namespace/name` of the VM a restore writes."""
    target = mapping(mapping(restore.get("spec")).get("target"))
    if target.get("kind") != "VirtualMachine" or not target.get("name"):
        return []
    return [f"{meta(restore).get('namespace')}/{target['name']}"]


def index_by_restore_snapshot(restore: RawObject) -> list[str]:
    """RESTORE_SNAPSHOT_INDEX: the `namespace/name` of the snapshot a restore reads."""
    name = mapping(restore.get("spec")).get("virtualMachineSnapshotName")
    return [f"{meta(restore).get('namespace')}/{name}"] if name else []


def _restore_id(restore: RawObject) -> str:
    return f"{meta(restore).get('name')}-{uid(restore)}"


class RestoreController:
    """Reconciles VirtualMachineRestores by key."""

    def __init__(
        self,
        client: KubeClient,
        restores: SharedInformer[RawObject],
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
        self.restores = restores
        self.snapshots = snapshots
        self.contents = contents
        self.vms = vms
        self.vmis = vmis
        self.queue = queue
        self.recorder = recorder
        self.now = now or (lambda: dt.datetime.now(dt.UTC))

    def on_restore(self, event: Event[RawObject]) -> None:
        self.queue.add(event.key)

    def _requeue(self, index: str, key: str) -> None:
        for restore in self.restores.store.by_index(index, key):
            self.queue.add(f"{meta(restore).get('namespace')}/{meta(restore).get('name')}")

    def on_target(self, event: Event[RawObject]) -> None:
        """VM and VMI events: the target's state decides the next step."""
        self._requeue(RESTORE_TARGET_INDEX, event.key)

    def on_snapshot(self, event: Event[RawObject]) -> None:
        self._requeue(RESTORE_SNAPSHOT_INDEX, event.key)

    async def reconcile(self, key: str) -> None:
        restore = self.restores.get_raw(key)
        if restore is None:
            return
        namespace = str(meta(restore).get("namespace"))
        spec = mapping(restore.get("spec"))
        target_name = str(mapping(spec.get("target")).get("name") or "")
        target_key = f"{namespace}/{target_name}"
        vm = self.vms.get_raw(target_key)
        status = mapping(restore.get("status"))
        if deleting(restore) or status.get("complete") is True:
            if vm is not None:
                await self._unlock(vm, restore)
            if deleting(restore):
                await set_finalizer(
                    self.client, VIRTUAL_MACHINE_RESTORES, restore, RESTORE_FINALIZER, False
                )
            return
        await set_finalizer(self.client, VIRTUAL_MACHINE_RESTORES, restore, RESTORE_FINALIZER, True)
        now = self.now()
        snapshot_name = str(spec.get("virtualMachineSnapshotName") or "")
        snapshot = self.snapshots.get_raw(f"{namespace}/{snapshot_name}")
        content = (
            self.contents.get_raw(f"{namespace}/{content_name(snapshot)}")
            if snapshot is not None
            else None
        )
        source = mapping(mapping(mapping(content or {}).get("spec")).get("source"))
        snapshot_vm = mapping(source.get("virtualMachine"))
        ready = (
            snapshot is not None
            and mapping(snapshot.get("status")).get("readyToUse") is True
            and bool(snapshot_vm)
        )
        if not ready:
            reason = f"Waiting for VMSnapshot {snapshot_name} to exist and be ready"
            await self._progress(restore, now, "False", reason, "False", reason)
            return
        if vm is None:
            await self._create_target(restore, snapshot_vm, target_name, now)
            return
        annotations = mapping(meta(vm).get("annotations"))
        if annotations.get(LAST_RESTORE_ANNOTATION) == _restore_id(restore):
            await self._complete(restore, now)
            await self._unlock(vm, restore)
            return
        if self.vmis.get_raw(target_key) is not None:
            await self._target_running(restore, vm, now)
            return
        held = mapping(vm.get("status")).get("restoreInProgress")
        if held != meta(restore).get("name"):
            if held or mapping(vm.get("status")).get("snapshotInProgress"):
                reason = f"Waiting for VM {target_name}: it is being snapshotted or restored"
                await self._progress(restore, now, "False", reason, "False", reason)
                return
            await self._lock(vm, restore)
            reason = "Initializing VirtualMachineRestore"
            await self._progress(restore, now, "True", reason, "False", reason)
            return
        await self._write_spec(vm, restore, snapshot_vm)
        reason = "Updating target spec"
        await self._progress(restore, now, "True", reason, "False", reason)

    async def _progress(
        self,
        restore: RawObject,
        now: dt.datetime,
        progressing: str,
        progressing_reason: str,
        ready: str,
        ready_reason: str,
        extra: dict[str, Any] | None = None,
    ) -> None:
        status = mapping(restore.get("status"))
        conditions = [thaw(c) for c in status.get("conditions") or ()]
        conditions = _upsert(conditions, "Progressing", progressing, now, reason=progressing_reason)
        conditions = _upsert(conditions, "Ready", ready, now, reason=ready_reason)
        wanted: dict[str, Any] = {"conditions": conditions, **(extra or {})}
        if "complete" not in status and "complete" not in wanted:
            wanted["complete"] = False
        await patch_status_if_changed(self.client, VIRTUAL_MACHINE_RESTORES, restore, wanted)

    async def _complete(self, restore: RawObject, now: dt.datetime) -> None:
        reason = "Operation complete"
        await self._progress(
            restore,
            now,
            "False",
            reason,
            "True",
            reason,
            extra={"complete": True, "restoreTime": format_time(now), "restores": []},
        )
        if self.recorder is not None:
            await self.recorder.event(
                restore,
                "Normal",
                _COMPLETE_EVENT,
                f"Successfully completed VirtualMachineRestore {meta(restore).get('name')}",
            )
        log.info("restored", restore=f"{meta(restore).get('namespace')}/{meta(restore)['name']}")

    async def _target_running(self, restore: RawObject, vm: RawObject, now: dt.datetime) -> None:
        """The target has a VMI: stop it, wait, or fail, as targetReadinessPolicy says."""
        policy = mapping(restore.get("spec")).get("targetReadinessPolicy") or "WaitGracePeriod"
        name = str(meta(vm).get("name"))
        if policy == "StopTarget":
            if mapping(vm.get("spec")).get("runStrategy") != "Halted":
                await self.client.merge_patch(
                    VIRTUAL_MACHINES,
                    name,
                    {"spec": {"runStrategy": "Halted", "running": None}},
                    str(meta(vm)["namespace"]),
                )
            reason = f"Stopping VM {name} to restore it (targetReadinessPolicy StopTarget)"
            await self._progress(restore, now, "True", reason, "False", reason)
            return
        created = parse_time(meta(restore).get("creationTimestamp")) or now
        expired = policy == "FailImmediate" or (
            policy == "WaitGracePeriod" and now - created > TARGET_GRACE_PERIOD
        )
        if expired:
            reason = (
                f"Restore target VM {name} is running; it must be stopped "
                f"(targetReadinessPolicy {policy})"
            )
            if self.recorder is not None and mapping(restore.get("status")).get("conditions"):
                await self.recorder.event(restore, "Warning", _ERROR_EVENT, reason)
            await self._progress(restore, now, "False", reason, "False", reason)
            return
        reason = f"Waiting for VM {name} to be stopped (targetReadinessPolicy {policy})"
        await self._progress(restore, now, "True", reason, "False", reason)
        if policy == "WaitGracePeriod":
            left = (created + TARGET_GRACE_PERIOD - now).total_seconds()
            self.queue.add_after(
                f"{meta(restore).get('namespace')}/{meta(restore)['name']}", left + 0.5
            )

    async def _lock(self, vm: RawObject, restore: RawObject) -> None:
        await set_vm_status_field(self.client, vm, "restoreInProgress", meta(restore)["name"])

    async def _unlock(self, vm: RawObject, restore: RawObject) -> None:
        name = meta(restore).get("name")
        if mapping(vm.get("status")).get("restoreInProgress") == name:
            await set_vm_status_field(self.client, vm, "restoreInProgress", None, expected=name)

    async def _write_spec(
        self, vm: RawObject, restore: RawObject, snapshot_vm: dict[str, Any] | Any
    ) -> None:
        """The snapshot's spec into the VM, marked with this restore."""
        m = meta(vm)
        wanted_spec = thaw(mapping(snapshot_vm).get("spec") or {})
        ops: list[JsonPatchOp] = [
            {"op": "test", "path": "/metadata/uid", "value": uid(vm)},
            {"op": "replace", "path": "/spec", "value": wanted_spec},
        ]
        if not m.get("annotations"):
            ops.append({"op": "add", "path": "/metadata/annotations", "value": {}})
        ops.append(
            {
                "op": "add",
                "path": pointer("metadata", "annotations", LAST_RESTORE_ANNOTATION),
                "value": _restore_id(restore),
            }
        )
        await self.client.json_patch(VIRTUAL_MACHINES, str(m["name"]), ops, str(m["namespace"]))

    async def _create_target(
        self,
        restore: RawObject,
        snapshot_vm: dict[str, Any] | Any,
        target_name: str,
        now: dt.datetime,
    ) -> None:
        """A VM named by the restore's target, built from the snapshot and its patches."""
        source = mapping(mapping(snapshot_vm).get("metadata"))
        annotations = dict(thaw(source.get("annotations") or {}))
        annotations[LAST_RESTORE_ANNOTATION] = _restore_id(restore)
        metadata: dict[str, Any] = {
            "name": target_name,
            "namespace": meta(restore)["namespace"],
            "annotations": annotations,
        }
        if source.get("labels"):
            metadata["labels"] = thaw(source["labels"])
        body: dict[str, Any] = {
            "apiVersion": "kubevirt.io/v1",
            "kind": "VirtualMachine",
            "metadata": metadata,
            "spec": thaw(mapping(snapshot_vm).get("spec") or {}),
        }
        try:
            ops = [json.loads(p) for p in mapping(restore.get("spec")).get("patches") or ()]
            body = apply_json_patch(body, ops)
        except (ValueError, JsonPatchError, KeyError, IndexError, TypeError) as exc:
            reason = f"spec.patches: {exc}"
            await self._progress(restore, now, "False", reason, "False", reason)
            return
        body["metadata"]["name"] = body["metadata"].get("name") or target_name
        try:
            await self.client.create(VIRTUAL_MACHINES, body)
        except ApiError as exc:
            if exc.status == 409:
                return  # the informer has not seen it yet; its event brings us back
            reason = f"Creating VM {target_name} failed: {exc}"
            await self._progress(restore, now, "False", reason, "False", reason)
            return
        reason = f"Created VM {target_name} from the snapshot"
        await self._progress(restore, now, "True", reason, "False", reason)
