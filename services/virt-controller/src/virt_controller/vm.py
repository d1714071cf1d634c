"""The VM controller: the VMI a VM's run strategy and state change requests call for.

Creates the VMI (named as the VM, controlled by it, holding our finalizer so its final
state is seen), deletes it to stop or restart, backs off after failed starts, and keeps
status.printableStatus, created, ready, conditions and startFailure.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from typing import Any

import structlog
from kube_runtime import (
    VIRTUAL_MACHINE_INSTANCES,
    VIRTUAL_MACHINES,
    ApiError,
    Event,
    KubeClient,
    RawObject,
    SharedInformer,
    WorkQueue,
    thaw,
)
from kubevirt_api import run_strategy
from kubevirt_api.enums import FINAL_VMI_PHASES, RunStrategy
from kubevirt_api.enums import VirtualMachineInstancePhase as Phase

from .expectations import Expectations
from .metrics import ControllerMetrics
from .objects import (
    condition,
    controller_owner,
    deleting,
    format_time,
    mapping,
    meta,
    owner_ref,
    phase,
    same_conditions,
    uid,
    upsert_condition,
)
from .printable import printable_status
from .runstrategy import (
    Action,
    VmiView,
    decide,
    start_backoff_seconds,
)
from .vmi import OWNER_INDEX
from .wellknown import MIGRATION_JOB_LABEL, VM_FINALIZER

__all__ = ["VmController", "next_start_failure"]

log = structlog.get_logger(__name__)


def _reached_running(vmi: RawObject) -> bool:
    for stamp in mapping(vmi.get("status")).get("phaseTransitionTimestamps") or ():
        if mapping(stamp).get("phase") == Phase.RUNNING:
            return True
    return phase(vmi) == Phase.RUNNING


def next_start_failure(
    current: Mapping[str, Any], vmi: RawObject | None, now: dt.datetime
) -> dict[str, Any] | None:
    """status.startFailure after seeing `vmi`: a VMI that failed without ever running counts
    one more consecutive failure (retry after a doubling delay); one that ran clears it."""
    if vmi is None:
        return dict(thaw(current)) if current else None
    if _reached_running(vmi) and phase(vmi) != Phase.FAILED:
        return None
    if phase(vmi) != Phase.FAILED or _reached_running(vmi):
        return dict(thaw(current)) if current else None
    if current.get("lastFailedVMIUID") == uid(vmi):
        return dict(thaw(current))
    count = int(current.get("consecutiveFailCount") or 0) + 1
    retry = now + dt.timedelta(seconds=start_backoff_seconds(count))
    return {
        "consecutiveFailCount": count,
        "lastFailedVMIUID": uid(vmi),
        "retryAfterTimestamp": format_time(retry),
    }


class VmController:
    """Reconciles VMs by key (a VM and its VMI share namespace/name)."""

    def __init__(
        self,
        client: KubeClient,
        vms: SharedInformer[RawObject],
        vmis: SharedInformer[RawObject],
        pods: SharedInformer[RawObject],
        queue: WorkQueue[str],
        metrics: ControllerMetrics,
        *,
        now: Callable[[], dt.datetime] | None = None,
    ) -> None:
        self.client = client
        self.vms = vms
        self.vmis = vmis
        self.pods = pods
        self.queue = queue
        self.metrics = metrics
        self.expectations = Expectations(queue.clock)
        self.now = now or (lambda: dt.datetime.now(dt.UTC))
        # startFailure as last written, per VM uid: the VM cache may lag behind our patch.
        self._failures: dict[str, dict[str, Any] | None] = {}

    def on_vm(self, event: Event[RawObject]) -> None:
        self.queue.add(event.key)
        if event.type.value == "DELETED":
            self.metrics.set_vm(event.key, None)

    def on_vmi(self, event: Event[RawObject]) -> None:
        ref = controller_owner(event.raw)
        if ref is None or ref.get("kind") != "VirtualMachine":
            return
        if event.type.value == "ADDED" and event.old_raw is None:
            self.expectations.creation_observed(event.key)
        elif event.type.value == "DELETED":
            self.expectations.deletion_observed(event.key, uid(event.raw))
        self.queue.add(event.key)

    def on_pod(self, event: Event[RawObject]) -> None:
        # Pod states (image pull errors) show in printableStatus.
        ref = controller_owner(event.raw)
        if ref is not None and ref.get("kind") == "VirtualMachineInstance":
            self.queue.add(f"{meta(event.raw).get('namespace')}/{ref.get('name')}")

    def _owned_vmi(self, vm: RawObject | None, vm_key: str) -> RawObject | None:
        vmi = self.vmis.get_raw(vm_key)
        if vmi is None or vm is None:
            return vmi if vm is None else None
        ref = controller_owner(vmi)
        return vmi if ref is not None and ref.get("uid") == uid(vm) else None

    async def reconcile(self, vm_key: str) -> None:
        vm = self.vms.get_raw(vm_key)
        vmi = self._owned_vmi(vm, vm_key)
        if vm is None:
            self.expectations.forget(vm_key)
            self._failures.clear() if len(self._failures) > 10000 else None
            if vmi is not None and VM_FINALIZER in (meta(vmi).get("finalizers") or ()):
                ref = controller_owner(vmi)
                if ref is not None and ref.get("kind") == "VirtualMachine":
                    if not deleting(vmi):
                        await self._delete_vmi(vm_key, vmi)
                    await self._drop_finalizer(vmi)
            return
        now = self.now()
        status = mapping(vm.get("status"))
        if (
            vmi is not None
            and (deleting(vmi) or phase(vmi) in FINAL_VMI_PHASES)
            and VM_FINALIZER in (meta(vmi).get("finalizers") or ())
        ):
            await self._drop_finalizer(vmi)
        known = mapping(status.get("startFailure"))
        written = self._failures.get(uid(vm))
        if written and int(written.get("consecutiveFailCount") or 0) > int(
            known.get("consecutiveFailCount") or 0
        ):
            known = written
        # Only the strategies that restart on their own back off (as upstream).
        restarts = run_strategy(vm) in (RunStrategy.ALWAYS, RunStrategy.RERUN_ON_FAILURE)
        start_failure = next_start_failure(known, vmi, now) if restarts else None
        requests = list(status.get("stateChangeRequests") or ())
        consumed = 0
        if deleting(vm):
            if vmi is not None and not deleting(vmi):
                await self._delete_vmi(vm_key, vmi)
        elif self.expectations.satisfied(vm_key):
            view = VmiView(uid(vmi), phase(vmi), deleting(vmi)) if vmi is not None else None
            decision = decide(run_strategy(vm), view, requests, start_failure or {}, now)
            consumed = decision.consumed
            if decision.action is Action.CREATE:
                # The status describes the VMI just created, not the empty cache.
                vmi = await self._create_vmi(vm_key, vm) or vmi
            elif decision.action is Action.DELETE and vmi is not None:
                await self._delete_vmi(vm_key, vmi)
            elif decision.action is Action.WAIT_BACKOFF and decision.retry_after is not None:
                self.queue.add_after(vm_key, decision.retry_after + 0.5)
        await self._patch_status(vm, vmi, requests, consumed, start_failure, now)

    async def _create_vmi(self, vm_key: str, vm: RawObject) -> RawObject | None:
        template = mapping(mapping(vm.get("spec")).get("template"))
        tmeta = mapping(template.get("metadata"))
        m = meta(vm)
        metadata: dict[str, Any] = {
            "name": m.get("name"),
            "namespace": m.get("namespace"),
            "ownerReferences": [owner_ref(vm, "kubevirt.io/v1", "VirtualMachine")],
            "finalizers": [VM_FINALIZER],
        }
        if tmeta.get("labels"):
            metadata["labels"] = thaw(tmeta["labels"])
        if tmeta.get("annotations"):
            metadata["annotations"] = thaw(tmeta["annotations"])
        body = {
            "apiVersion": "kubevirt.io/v1",
            "kind": "VirtualMachineInstance",
            "metadata": metadata,
            "spec": thaw(template.get("spec") or {}),
        }
        self.expectations.expect_creations(vm_key, 1)
        try:
            created = await self.client.create(VIRTUAL_MACHINE_INSTANCES, body)
        except ApiError as exc:
            self.expectations.creation_observed(vm_key)
            if exc.conflict:
                return None  # it exists: the informer will show it
            raise
        log.info("created vmi", vm=vm_key)
        return created if isinstance(created, Mapping) else None

    async def _delete_vmi(self, vm_key: str, vmi: RawObject) -> None:
        m = meta(vmi)
        self.expectations.expect_deletions(vm_key, [uid(vmi)])
        try:
            await self.client.delete(
                VIRTUAL_MACHINE_INSTANCES, str(m["name"]), str(m["namespace"]), uid=uid(vmi)
            )
        except ApiError as exc:
            self.expectations.deletion_observed(vm_key, uid(vmi))
            if not (exc.not_found or exc.conflict):
                raise
        log.info("deleted vmi", vm=vm_key, vmi_uid=uid(vmi))

    async def _drop_finalizer(self, vmi: RawObject) -> None:
        m = meta(vmi)
        finalizers = list(m.get("finalizers") or ())
        kept = [f for f in finalizers if f != VM_FINALIZER]
        ops: list[Any] = [
            {"op": "test", "path": "/metadata/uid", "value": uid(vmi)},
            {"op": "test", "path": "/metadata/finalizers", "value": finalizers},
            {"op": "replace", "path": "/metadata/finalizers", "value": kept},
        ]
        try:
            await self.client.json_patch(
                VIRTUAL_MACHINE_INSTANCES, str(m["name"]), ops, str(m["namespace"])
            )
        except ApiError as exc:
            if not exc.not_found:
                raise

    def _launcher_pod(self, vmi: RawObject | None) -> RawObject | None:
        if vmi is None:
            return None
        for pod in self.pods.store.by_index(OWNER_INDEX, uid(vmi)):
            if MIGRATION_JOB_LABEL not in (mapping(meta(pod).get("labels"))):
                return pod
        return None

    async def _patch_status(
        self,
        vm: RawObject,
        vmi: RawObject | None,
        requests: list[Any],
        consumed: int,
        start_failure: dict[str, Any] | None,
        now: dt.datetime,
    ) -> None:
        status = mapping(vm.get("status"))
        remaining = [thaw(r) for r in requests[consumed:]]
        view = dict(thaw(vm))
        view["status"] = {**thaw(status), "stateChangeRequests": remaining}
        if start_failure is None:
            view["status"].pop("startFailure", None)
        else:
            view["status"]["startFailure"] = start_failure
        printable = printable_status(view, vmi, self._launcher_pod(vmi), now)
        ready_cond = condition(vmi, "Ready")
        ready = bool(
            vmi is not None
            and phase(vmi) not in FINAL_VMI_PHASES
            and ready_cond is not None
            and ready_cond.get("status") == "True"
        )
        conditions = upsert_condition(
            list(status.get("conditions") or ()),
            "Ready",
            "True" if ready else "False",
            now,
            reason="" if ready else ("VMINotExists" if vmi is None else "PodNotReady"),
        )
        wanted: dict[str, Any] = {
            "printableStatus": printable,
            "created": vmi is not None,
            "ready": ready,
            "runStrategy": run_strategy(vm),
            "conditions": conditions,
        }
        ops: list[Any] = []
        if not status:
            ops.append({"op": "add", "path": "/status", "value": {}})
        if consumed:
            ops.append(
                {"op": "test", "path": "/status/stateChangeRequests", "value": thaw(requests)}
            )
            if remaining:
                ops.append(
                    {"op": "replace", "path": "/status/stateChangeRequests", "value": remaining}
                )
            else:
                ops.append({"op": "remove", "path": "/status/stateChangeRequests"})
        for name, value in wanted.items():
            if name == "conditions" and same_conditions(status.get(name) or (), value):
                continue
            if thaw(status.get(name)) != value:
                ops.append({"op": "add", "path": f"/status/{name}", "value": value})
        if start_failure is None and "startFailure" in status:
            ops.append({"op": "remove", "path": "/status/startFailure"})
        elif start_failure is not None and thaw(status.get("startFailure")) != start_failure:
            ops.append({"op": "add", "path": "/status/startFailure", "value": start_failure})
        m = meta(vm)
        self.metrics.set_vm(
            f"{m.get('namespace')}/{m.get('name')}",
            {
                "name": str(m.get("name") or ""),
                "namespace": str(m.get("namespace") or ""),
                "status": printable.lower(),
            },
        )
        if not ops:
            return
        ops.insert(0, {"op": "test", "path": "/metadata/uid", "value": uid(vm)})
        try:
            await self.client.json_patch(
                VIRTUAL_MACHINES, str(m["name"]), ops, str(m["namespace"]), subresource="status"
            )
        except ApiError as exc:
            if not exc.not_found:
                raise
            return
        self._failures[uid(vm)] = start_failure
