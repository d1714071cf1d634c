"""The VM controller: the VMI a VM's run strategy and state change requests call for.

Creates the VMI (named as the VM, controlled by it, holding our finalizer so its final
state is seen), deletes it to stop or restart, backs off after failed starts, and keeps
status.printableStatus, created, ready, conditions and startFailure. Its Events are
upstream's: SuccessfulCreate/FailedCreate for the VMI it starts, SuccessfulDelete/
FailedDelete for the VMI it stops. Its conditions are upstream's: Ready copied from the
VMI (VMINotExists, VMIConditionMissing), the VMI's other conditions copied as they are
(Paused, AgentConnected, LiveMigratable, Synchronized, ...), Failure and RestartRequired.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from typing import Any

import structlog
from kube_runtime import (
    PERSISTENT_VOLUME_CLAIMS,
    VIRTUAL_MACHINE_INSTANCES,
    VIRTUAL_MACHINES,
    ApiError,
    Event,
    EventRecorder,
    EventType,
    JsonPatchOp,
    KubeClient,
    RawObject,
    SharedInformer,
    WorkQueue,
    thaw,
)
from kubevirt_api import run_strategy
from kubevirt_api.conditions import same_condition, vm_ready_condition
from kubevirt_api.defaults import DefaultingError, DefaultsConfig
from kubevirt_api.enums import FINAL_VMI_PHASES, RunStrategy
from kubevirt_api.enums import VirtualMachineInstancePhase as Phase
from kubevirt_api.event_reasons import (
    FAILED_DELETE,
    SUCCESSFUL_CREATE,
    SUCCESSFUL_DELETE,
)
from kubevirt_api.instancetypes import ConflictError
from kubevirt_api.memorydump import PVC_ANNOTATION, request_has_completed

from .expectations import Expectations
from .hotplug import vmi_hotplug_ops
from .instancetypes import (
    FAILED_CREATE,
    FAILED_FIND_INSTANCETYPE,
    FAILED_FIND_PREFERENCE,
    RESTART_REQUIRED_MESSAGE,
    InstancetypeSync,
    SyncFailedError,
    SyncFailure,
    SyncOutcome,
    build_vmi,
    conflict_message,
    names_instancetypes,
    restart_required,
)
from .memorydump import (
    claim_annotation,
    next_request,
    template_volume_ops,
    vmi_volume_ops,
    without_dump_volume,
)
from .metrics import ControllerMetrics
from .objects import (
    condition,
    controller_owner,
    deleting,
    format_time,
    key,
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
from .wellknown import VM_FINALIZER

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


_OUR_FAILURES = frozenset({FAILED_FIND_INSTANCETYPE, FAILED_FIND_PREFERENCE, FAILED_CREATE})


def _instancetype_conditions(
    vm: RawObject,
    vmi: RawObject | None,
    conditions: list[dict[str, Any]],
    failure: SyncFailure | None,
    now: dt.datetime,
) -> list[dict[str, Any]]:
    """Failure (a sync that could not proceed) and RestartRequired (a running VMI built
    from other instancetype or preference matchers), as upstream sets them."""
    if failure is not None:
        conditions = upsert_condition(
            conditions, "Failure", "True", now, reason=failure.reason, message=failure.message
        )
    else:
        present = next((c for c in conditions if c.get("type") == "Failure"), None)
        if present is not None and present.get("reason") in _OUR_FAILURES:
            conditions = upsert_condition(conditions, "Failure", None, now)
    if restart_required(vm, vmi):
        return upsert_condition(
            conditions, "RestartRequired", "True", now, message=RESTART_REQUIRED_MESSAGE
        )
    if vmi is None or names_instancetypes(vm):
        return upsert_condition(conditions, "RestartRequired", None, now)
    return conditions


# VMI conditions a VM does not copy: it has its own Ready, Failure and RestartRequired.
_NOT_COPIED = frozenset({"Ready", "Failure", "RestartRequired"})


def _vmi_conditions(
    current: list[dict[str, Any]], vmi: RawObject | None, stamp: str
) -> list[dict[str, Any]]:
    """The VM's Ready (the VMI's, copied) and the VMI's other conditions, copied as
    upstream's syncConditions does; a condition unchanged in status, reason and message
    keeps its times, so nothing is rewritten for them."""
    copied = [mapping(c) for c in mapping((vmi or {}).get("status")).get("conditions") or ()]
    wanted: dict[str, dict[str, Any] | None] = {"Ready": vm_ready_condition(vmi, stamp)}
    # A copied condition the VMI no longer has (or the VMI is gone) goes.
    wanted.update({str(c.get("type")): None for c in current if c.get("type") not in _NOT_COPIED})
    for cond in copied:
        if cond.get("type") not in _NOT_COPIED:
            wanted[str(cond.get("type"))] = {k: v for k, v in thaw(cond).items() if v != ""}
    out: list[dict[str, Any]] = []
    for cond in current:
        kind = str(cond.get("type"))
        if kind not in wanted:
            out.append(cond)
            continue
        new = wanted.pop(kind)
        if new is not None:
            out.append(cond if same_condition(cond, new) else new)
    out.extend(new for new in wanted.values() if new is not None)
    return out


class VmController:
    """Reconciles VMs by key (a VM and its VMI share namespace/name)."""

    def __init__(
        self,
        client: KubeClient,
        vms: SharedInformer[RawObject],
        vmis: SharedInformer[RawObject],
        queue: WorkQueue[str],
        metrics: ControllerMetrics,
        *,
        recorder: EventRecorder | None = None,
        now: Callable[[], dt.datetime] | None = None,
        defaults: Callable[[], DefaultsConfig] = DefaultsConfig,
        claims: SharedInformer[RawObject] | None = None,
    ) -> None:
        self.client = client
        self.vms = vms
        self.vmis = vmis
        #: The claims a memory dump annotates (None: no annotation is written).
        self.claims = claims
        self.recorder = recorder
        self.queue = queue
        self.metrics = metrics
        self.expectations = Expectations(queue.clock)
        self.now = now or (lambda: dt.datetime.now(dt.UTC))
        # startFailure as last written, per VM uid: the VM cache may lag behind our patch.
        self._failures: dict[str, dict[str, Any] | None] = {}
        self.instancetypes = InstancetypeSync(client)
        #: The defaults the VMI is built with (the pod interface preferences apply to).
        self.defaults = defaults

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
                        await self._delete_vmi(vm_key, None, vmi)
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
        synced = SyncOutcome() if deleting(vm) else await self.instancetypes.sync(vm)
        failure = synced.failure
        if deleting(vm):
            if vmi is not None and not deleting(vmi):
                await self._delete_vmi(vm_key, vm, vmi)
        elif failure is None and self.expectations.satisfied(vm_key):
            view = VmiView(uid(vmi), phase(vmi), deleting(vmi)) if vmi is not None else None
            decision = decide(run_strategy(vm), view, requests, start_failure or {}, now)
            consumed = decision.consumed
            if decision.action is Action.CREATE and status.get("restoreInProgress"):
                # A VirtualMachineRestore is rewriting the spec: start once it is done.
                consumed = 0
                log.info("start held: restore in progress", vm=vm_key)
            elif decision.action is Action.CREATE:
                # The status describes the VMI just created, not the empty cache.
                created = await self._create_vmi(vm_key, vm, synced)
                if isinstance(created, SyncFailure):
                    failure, consumed = created, 0
                else:
                    vmi = created or vmi
            elif decision.action is Action.DELETE and vmi is not None:
                await self._delete_vmi(vm_key, vm, vmi)
            elif decision.action is Action.WAIT_BACKOFF and decision.retry_after is not None:
                self.queue.add_after(vm_key, decision.retry_after + 0.5)
        if vmi is not None and not deleting(vm) and not deleting(vmi):
            await self._sync_hotplug_volumes(vm, vmi)
        dump_request = (
            thaw(status.get("memoryDumpRequest"))
            if deleting(vm)
            else await self._sync_memory_dump(vm, vmi)
        )
        await self._patch_status(
            vm,
            vmi,
            requests,
            consumed,
            start_failure,
            now,
            synced.refs,
            failure,
            dump_request=dump_request,
        )
        if failure is not None:
            raise SyncFailedError(failure)

    async def _sync_hotplug_volumes(self, vm: RawObject, vmi: RawObject) -> None:
        """A running VMI gets the template's hotplugged volumes, and loses those the
        template no longer has (upstream's declarative hotplug; hotplug.py)."""
        if phase(vmi) != Phase.RUNNING:
            return
        template = mapping(mapping(mapping(vm.get("spec")).get("template")).get("spec"))
        ops = vmi_hotplug_ops(template, vmi)
        if not ops:
            return
        m = meta(vmi)
        guarded: list[JsonPatchOp] = [
            {"op": "test", "path": "/metadata/uid", "value": uid(vmi)},
            *ops,
        ]
        try:
            await self.client.json_patch(
                VIRTUAL_MACHINE_INSTANCES, str(m.get("name")), guarded, str(m.get("namespace"))
            )
        except ApiError as exc:
            if exc.not_found:
                return
            if exc.status in (409, 422):  # changed meanwhile: the informer brings it back
                log.info("hotplug volumes not synced yet", vmi=key(vmi), error=str(exc))
                return
            raise
        log.info("synced hotplug volumes to the vmi", vmi=key(vmi))

    async def _sync_memory_dump(
        self, vm: RawObject, vmi: RawObject | None
    ) -> dict[str, Any] | None:
        """Move a memory dump request on (memorydump.py): the dump volume into or out of
        the VM's template and the VMI, the claim's annotation; the request to write."""
        request = mapping(mapping(vm.get("status")).get("memoryDumpRequest"))
        if not request:
            return None
        template = mapping(mapping(mapping(vm.get("spec")).get("template")).get("spec"))
        m = meta(vm)
        name, namespace = str(m.get("name")), str(m.get("namespace"))
        ops = template_volume_ops(request, template, vmi)
        if ops:
            guarded: list[JsonPatchOp] = [
                {"op": "test", "path": "/metadata/uid", "value": uid(vm)},
                *ops,
            ]
            try:
                await self.client.json_patch(VIRTUAL_MACHINES, name, guarded, namespace)
            except ApiError as exc:
                if exc.not_found or exc.status in (409, 422):
                    log.info("memory dump volume not in the template yet", vm=key(vm))
                    return dict(thaw(request))  # the informer brings the VM back
                raise
            template = {**template, "volumes": ops[-1]["value"]}
        if vmi is not None and (vmi_ops := vmi_volume_ops(request, vmi)):
            m_vmi = meta(vmi)
            try:
                await self.client.json_patch(
                    VIRTUAL_MACHINE_INSTANCES,
                    str(m_vmi.get("name")),
                    [{"op": "test", "path": "/metadata/uid", "value": uid(vmi)}, *vmi_ops],
                    str(m_vmi.get("namespace")),
                )
            except ApiError as exc:
                if not (exc.not_found or exc.status in (409, 422)):
                    raise
                log.info("memory dump volume not synced to the vmi yet", vmi=key(vmi))
        await self._annotate_dump_claim(namespace, request)
        return next_request(request, template, vmi)

    async def _annotate_dump_claim(self, namespace: str, request: Mapping[str, Any]) -> None:
        """Write the dump's file name (or its failure) onto the claim, once."""
        value = claim_annotation(request)
        claim_name = str(request.get("claimName") or "")
        if value is None or self.claims is None:
            return
        claim = self.claims.get_raw(f"{namespace}/{claim_name}")
        if claim is None or mapping(meta(claim).get("annotations")).get(PVC_ANNOTATION) == value:
            return
        try:
            await self.client.merge_patch(
                PERSISTENT_VOLUME_CLAIMS,
                claim_name,
                {"metadata": {"annotations": {PVC_ANNOTATION: value}}},
                namespace,
            )
        except ApiError as exc:
            if not exc.not_found:
                raise

    async def _create_vmi(
        self, vm_key: str, vm: RawObject, synced: SyncOutcome
    ) -> RawObject | SyncFailure | None:
        template = mapping(mapping(vm.get("spec")).get("template"))
        tmeta = mapping(template.get("metadata"))
        spec: dict[str, Any] = thaw(template.get("spec") or {})
        dump = mapping(mapping(vm.get("status")).get("memoryDumpRequest"))
        if dump and request_has_completed(dump.get("phase")):
            # A dump that is over is not taken again by a new VMI (as upstream).
            spec = without_dump_volume(spec, str(dump.get("claimName") or ""))
        annotations: dict[str, Any] = thaw(tmeta.get("annotations") or {})
        if synced.specs is not None:
            try:
                spec, annotations = build_vmi(vm, synced.specs, spec, annotations, self.defaults())
            except ConflictError as error:
                log.info("instancetype conflicts with the vmi", vm=vm_key, error=str(error))
                message = conflict_message(error)
                await self._event(
                    vm,
                    "Warning",
                    FAILED_CREATE,
                    f"Error creating virtual machine instance: Failed to apply instancetype: "
                    f"{message}",
                )
                return SyncFailure(FAILED_CREATE, message)
            except DefaultingError as error:
                await self._event(
                    vm,
                    "Warning",
                    FAILED_CREATE,
                    f"Error creating virtual machine instance: {error}",
                )
                return SyncFailure(FAILED_CREATE, str(error))
        m = meta(vm)
        metadata: dict[str, Any] = {
            "name": m.get("name"),
            "namespace": m.get("namespace"),
            "ownerReferences": [owner_ref(vm, "kubevirt.io/v1", "VirtualMachine")],
            "finalizers": [VM_FINALIZER],
        }
        if tmeta.get("labels"):
            metadata["labels"] = thaw(tmeta["labels"])
        if annotations:
            metadata["annotations"] = annotations
        body = {
            "apiVersion": "kubevirt.io/v1",
            "kind": "VirtualMachineInstance",
            "metadata": metadata,
            "spec": spec,
        }
        self.expectations.expect_creations(vm_key, 1)
        try:
            created = await self.client.create(VIRTUAL_MACHINE_INSTANCES, body)
        except ApiError as exc:
            self.expectations.creation_observed(vm_key)
            if exc.conflict:
                return None  # it exists: the informer will show it
            await self._event(
                vm, "Warning", FAILED_CREATE, f"Error creating virtual machine instance: {exc}"
            )
            raise
        log.info("created vmi", vm=vm_key)
        await self._event(
            vm,
            "Normal",
            SUCCESSFUL_CREATE,
            "Started the virtual machine by creating the new virtual machine instance "
            f"{metadata['name']}",
        )
        return created if isinstance(created, Mapping) else None

    async def _event(self, vm: RawObject, type_: EventType, reason: str, message: str) -> None:
        if self.recorder is not None:
            await self.recorder.event(vm, type_, reason, message)

    async def _delete_vmi(self, vm_key: str, vm: RawObject | None, vmi: RawObject) -> None:
        """Delete the VMI; Events go on `vm` (None: the VM is gone, nothing to tell)."""
        m = meta(vmi)
        self.expectations.expect_deletions(vm_key, [uid(vmi)])
        try:
            await self.client.delete(
                VIRTUAL_MACHINE_INSTANCES, str(m["name"]), str(m["namespace"]), uid=uid(vmi)
            )
        except ApiError as exc:
            self.expectations.deletion_observed(vm_key, uid(vmi))
            if exc.not_found or exc.conflict:
                return
            if vm is not None:
                await self._event(
                    vm,
                    "Warning",
                    FAILED_DELETE,
                    f"Error deleting virtual machine instance {m.get('name')}: {exc}",
                )
            raise
        log.info("deleted vmi", vm=vm_key, vmi_uid=uid(vmi))
        if vm is not None:
            await self._event(
                vm,
                "Normal",
                SUCCESSFUL_DELETE,
                f"Stopped the virtual machine by deleting the virtual machine instance {uid(vmi)}",
            )

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

    async def _patch_status(
        self,
        vm: RawObject,
        vmi: RawObject | None,
        requests: list[Any],
        consumed: int,
        start_failure: dict[str, Any] | None,
        now: dt.datetime,
        refs: Mapping[str, Any] | None = None,
        failure: SyncFailure | None = None,
        *,
        dump_request: dict[str, Any] | None = None,
    ) -> None:
        status = mapping(vm.get("status"))
        remaining = [thaw(r) for r in requests[consumed:]]
        view = dict(thaw(vm))
        view["status"] = {**thaw(status), "stateChangeRequests": remaining}
        if start_failure is None:
            view["status"].pop("startFailure", None)
        else:
            view["status"]["startFailure"] = start_failure
        printable = printable_status(view, vmi, now)
        ready_cond = condition(vmi, "Ready")
        ready = bool(
            vmi is not None
            and phase(vmi) not in FINAL_VMI_PHASES
            and ready_cond is not None
            and ready_cond.get("status") == "True"
        )
        conditions = _vmi_conditions(
            [thaw(c) for c in status.get("conditions") or ()], vmi, format_time(now)
        )
        conditions = _instancetype_conditions(vm, vmi, conditions, failure, now)
        wanted: dict[str, Any] = {
            "printableStatus": printable,
            "created": vmi is not None,
            "ready": ready,
            "runStrategy": run_strategy(vm),
            "conditions": conditions,
            **(refs or {}),
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
        old_dump = thaw(status.get("memoryDumpRequest"))
        if old_dump is not None and old_dump != dump_request:
            # virt-api writes the request too: change only the one this pass read.
            ops.append({"op": "test", "path": "/status/memoryDumpRequest", "value": old_dump})
            if dump_request is None:
                ops.append({"op": "remove", "path": "/status/memoryDumpRequest"})
            else:
                ops.append(
                    {"op": "replace", "path": "/status/memoryDumpRequest", "value": dump_request}
                )
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
