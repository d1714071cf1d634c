"""The VirtualMachinePool controller (pool.kubevirt.io): spec.replicas VMs from one template.

As upstream: VMs are named `<pool>-<n>` (lowest free index first), owned by the pool and
held by its finalizer; each carries the ControllerRevision (`<pool>-<generation>`, the pool
spec) it was made from. Scale-in deletes in the scaleInStrategy's order (default Random).
A changed template is written into the VMs (opportunistic update), then VMIs made from an
older template are restarted, at most maxUnavailable at once (proactive update, the default).
Status carries replicas, readyReplicas and the selector the scale subresource reads.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import structlog
from kube_runtime import (
    CONTROLLER_REVISIONS,
    DATA_VOLUMES,
    PERSISTENT_VOLUME_CLAIMS,
    VIRTUAL_MACHINE_INSTANCES,
    VIRTUAL_MACHINES,
    ApiError,
    Event,
    EventRecorder,
    JsonPatchOp,
    KubeClient,
    RawObject,
    Resource,
    SharedInformer,
    WorkQueue,
    thaw,
)
from kubevirt_api.resources import VIRTUAL_MACHINE_POOLS
from kubevirt_api.selectors import SelectorError, matches, selector_string

from .bursts import BURST, in_bursts
from .expectations import Expectations
from .objects import (
    condition,
    controller_owner,
    deleting,
    key,
    labels,
    mapping,
    meta,
    owner_ref,
    phase,
    uid,
    upsert_condition,
)
from .poolspec import (
    POOL_FINALIZER,
    REVISION_LABEL,
    UpdateKind,
    heal_after,
    indexed_vm_spec,
    kept_volumes,
    max_unavailable,
    name_index,
    new_vm_names,
    revision_name,
    select_by,
    sort_by_policy,
    vm_outdated,
    vmi_update,
)
from .vmi import OWNER_INDEX
from .writes import create_expected, delete_expected, patch_status_if_changed, set_finalizer

__all__ = ["POOL_KIND", "PoolController"]

log = structlog.get_logger(__name__)

POOL_KIND = "VirtualMachinePool"
# Upstream re-checks a pool whose update waits on maxUnavailable after this long.
RETRY_DELAY = 3.0


class SyncError(Exception):
    """A failed step of one reconcile, with the reason its condition and event carry."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


class PoolController:
    """Reconciles VirtualMachinePools by key. `vms` and `revisions` are indexed by OWNER_INDEX
    (controlling owner's uid); `vmis` are looked up by key (a VMI is named as its VM)."""

    def __init__(
        self,
        client: KubeClient,
        pools: SharedInformer[RawObject],
        vms: SharedInformer[RawObject],
        vmis: SharedInformer[RawObject],
        revisions: SharedInformer[RawObject],
        queue: WorkQueue[str],
        *,
        recorder: EventRecorder | None = None,
        now: Callable[[], dt.datetime] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.client = client
        self.pools = pools
        self.vms = vms
        self.vmis = vmis
        self.revisions = revisions
        self.queue = queue
        self.recorder = recorder
        self.expectations = Expectations(queue.clock)
        self.now = now or (lambda: dt.datetime.now(dt.UTC))
        self.rng = rng or random.Random()

    # -- informer handlers: they only enqueue the owning pool --------------------------------

    def _owning_pool(self, obj: RawObject) -> str | None:
        ref = controller_owner(obj)
        if ref is None or ref.get("kind") != POOL_KIND:
            return None
        return f"{meta(obj).get('namespace')}/{ref.get('name')}"

    def on_pool(self, event: Event[RawObject]) -> None:
        self.queue.add(event.key)

    def on_vm(self, event: Event[RawObject]) -> None:
        pool_key = self._owning_pool(event.raw)
        if pool_key is None:
            return
        if event.type.value == "ADDED" and event.old_raw is None and not deleting(event.raw):
            self.expectations.creation_observed(pool_key)
        if event.type.value == "DELETED" or deleting(event.raw):
            self.expectations.deletion_observed(pool_key, uid(event.raw))
        self.queue.add(pool_key)

    def on_vmi(self, event: Event[RawObject]) -> None:
        # A VMI's readiness and revision decide the proactive update of its pool.
        vm = self.vms.get_raw(event.key)
        ref = controller_owner(event.raw)
        if vm is None or ref is None or ref.get("uid") != uid(vm):
            return
        pool_key = self._owning_pool(vm)
        if pool_key is not None:
            self.queue.add(pool_key)

    def on_revision(self, event: Event[RawObject]) -> None:
        pool_key = self._owning_pool(event.raw)
        if pool_key is None:
            return
        if event.type.value == "ADDED" and event.old_raw is None:
            self.expectations.creation_observed(pool_key)
        self.queue.add(pool_key)

    # -- reconcile -----------------------------------------------------------------------

    async def reconcile(self, pool_key: str) -> None:
        pool = self.pools.get_raw(pool_key)
        if pool is None:
            self.expectations.forget(pool_key)
            return
        spec = mapping(pool.get("spec"))
        selector = mapping(spec.get("selector"))
        template_labels = labels(
            {"metadata": mapping(spec.get("virtualMachineTemplate")).get("metadata")}
        )
        try:
            usable = matches(selector, template_labels)
        except SelectorError as exc:
            log.error("invalid selector on pool; not retried", pool=pool_key, error=str(exc))
            return
        if not usable:
            log.error("the selector does not match the template's labels", pool=pool_key)
            return
        owned = self.vms.store.by_index(OWNER_INDEX, uid(pool))
        vms = [v for v in owned if matches(selector, labels(v))]
        failure: SyncError | None = None
        try:
            if spec.get("autohealing") is not None and not deleting(pool):
                try:
                    await self._autoheal(pool_key, pool, vms, mapping(spec.get("autohealing")))
                except (ApiError, SelectorError, ValueError) as exc:
                    failure = SyncError("FailedScaleIn", f"error during autohealing: {exc}")
            if not deleting(pool):
                for vm in owned:
                    if not matches(selector, labels(vm)):
                        await self._disown(pool, vm)
                await set_finalizer(self.client, VIRTUAL_MACHINE_POOLS, pool, POOL_FINALIZER, True)
                ready = failure is None and self.expectations.satisfied(pool_key)
                if ready and not spec.get("paused"):
                    failure = await self._sync(pool_key, pool, vms)
            else:
                await self._let_go(pool, owned)
        finally:
            await self._update_status(pool, vms, failure)
        if failure is not None:
            raise failure

    async def _sync(self, pool_key: str, pool: RawObject, vms: list[RawObject]) -> SyncError | None:
        """Scale, then update, then prune revisions, each once the one before is stable."""
        try:
            scaled = await self._scale(pool_key, pool, vms)
        except (ApiError, SelectorError) as exc:
            reason = "FailedScaleOut" if self._wanted(pool) > len(vms) else "FailedScaleIn"
            return SyncError(reason, f"error during scale: {exc}")
        if not scaled or not self.expectations.satisfied(pool_key):
            return None
        try:
            updated = await self._update(pool_key, pool, vms)
        except (ApiError, SelectorError, ValueError) as exc:
            return SyncError("FailedUpdate", f"error during update: {exc}")
        if not updated or not self.expectations.satisfied(pool_key):
            return None
        try:
            await self._prune_revisions(pool, vms)
        except ApiError as exc:
            return SyncError(
                "FailedRevisionPruning", f"error while pruning vmpool revisions: {exc}"
            )
        return None

    @staticmethod
    def _wanted(pool: RawObject) -> int:
        replicas = mapping(pool.get("spec")).get("replicas")
        return replicas if isinstance(replicas, int) and replicas >= 0 else 1

    # -- scale ---------------------------------------------------------------------------

    async def _scale(self, pool_key: str, pool: RawObject, vms: list[RawObject]) -> bool:
        """One step toward spec.replicas (at most BURST VMs); True when already there."""
        scale_in = mapping(mapping(pool.get("spec")).get("scaleInStrategy"))
        unmanaged = scale_in.get("unmanaged") is not None
        diff = len(vms) - self._wanted(pool)
        if diff == 0:
            # Opportunistic scale-in: VMs deleted by someone else leave the pool for good.
            if not unmanaged:
                preserve = _preserves(mapping(scale_in.get("opportunistic")))
                for vm in vms:
                    if deleting(vm):
                        await self._leave_pool(vm, preserve)
            return True
        count = min(abs(diff), BURST)
        if diff < 0:
            await self._scale_out(pool_key, pool, count)
        elif not unmanaged and scale_in.get("opportunistic") is None:
            live = [v for v in vms if not deleting(v)]
            # VMs already going count toward the scale-in.
            await self._scale_in(pool_key, pool, live, count - (len(vms) - len(live)))
        return False

    async def _scale_out(self, pool_key: str, pool: RawObject, count: int) -> None:
        namespace = str(meta(pool).get("namespace"))
        names = new_vm_names(
            str(meta(pool).get("name")),
            count,
            lambda n: self.vms.get_raw(f"{namespace}/{n}") is not None,
        )
        revision = await self._ensure_revision(pool_key, pool)
        self.expectations.expect_creations(pool_key, len(names))

        async def create(name: str) -> None:
            body = self._vm_body(pool, name, revision)
            await create_expected(self.client, VIRTUAL_MACHINES, body, self.expectations, pool_key)
            await self._event(pool, "Normal", "SuccessfulCreate", f"Created VM {namespace}/{name}")

        errors = await in_bursts(names, create)
        log.info("scaled out", pool=pool_key, created=len(names) - len(errors))
        if errors:
            await self._event(pool, "Warning", "FailedCreate", f"Error creating VM: {errors[0]}")
            raise errors[0]

    def _vm_body(self, pool: RawObject, name: str, revision: str) -> dict[str, Any]:
        spec = mapping(pool.get("spec"))
        tmeta = mapping(mapping(spec.get("virtualMachineTemplate")).get("metadata"))
        vm_spec = indexed_vm_spec(spec, name_index(name) or 0)
        template = vm_spec.setdefault("template", {})
        template.setdefault("metadata", {}).setdefault("labels", {})[REVISION_LABEL] = revision
        metadata: dict[str, Any] = {
            "name": name,
            "namespace": meta(pool).get("namespace"),
            "labels": {**thaw(tmeta.get("labels") or {}), REVISION_LABEL: revision},
            "finalizers": [POOL_FINALIZER],
            "ownerReferences": [owner_ref(pool, VIRTUAL_MACHINE_POOLS.api_version, POOL_KIND)],
        }
        if tmeta.get("annotations"):
            metadata["annotations"] = thaw(tmeta["annotations"])
        return {
            "apiVersion": VIRTUAL_MACHINES.api_version,
            "kind": "VirtualMachine",
            "metadata": metadata,
            "spec": vm_spec,
        }

    async def _scale_in(
        self, pool_key: str, pool: RawObject, live: list[RawObject], count: int
    ) -> None:
        if count <= 0 or not live:
            return
        proactive = mapping(
            mapping(mapping(pool.get("spec")).get("scaleInStrategy")).get("proactive")
        )
        selection = mapping(proactive.get("selectionPolicy"))
        ordered = sort_by_policy(live, selection, self.rng)
        if selection.get("selectors") is not None:
            ordered = select_by(ordered, mapping(selection.get("selectors")))
        victims = ordered[:count]
        preserve = _preserves(proactive)
        self.expectations.expect_deletions(pool_key, [uid(v) for v in victims])

        async def delete(vm: RawObject) -> None:
            name = f"{meta(vm).get('namespace')}/{meta(vm).get('name')}"
            try:
                gone = await delete_expected(
                    self.client, VIRTUAL_MACHINES, vm, self.expectations, pool_key
                )
            except ApiError as exc:
                message = f"Error deleting virtual machine {name}: {exc}"
                await self._event(pool, "Warning", "FailedDelete", message)
                raise
            if gone:
                await self._leave_pool(vm, preserve)
                message = f"Deleted VM {name} with uid {uid(vm)} from pool"
                await self._event(pool, "Normal", "SuccessfulDelete", message)

        errors = await in_bursts(victims, delete)
        log.info("scaled in", pool=pool_key, deleted=len(victims) - len(errors))
        if errors:
            raise errors[0]

    async def _leave_pool(self, vm: RawObject, preserve: bool) -> None:
        """A deleted VM goes for good: with statePreservation its PVCs and DataVolumes stop
        being its (so they outlive it and serve the VM made again under its name)."""
        if preserve:
            claims, volumes = kept_volumes(vm)
            for resource, names in ((PERSISTENT_VOLUME_CLAIMS, claims), (DATA_VOLUMES, volumes)):
                for name in names:
                    await self._drop_owner(resource, name, str(meta(vm).get("namespace")), vm)
        await set_finalizer(self.client, VIRTUAL_MACHINES, vm, POOL_FINALIZER, False)

    async def _drop_owner(
        self, resource: Resource, name: str, namespace: str, owner: RawObject
    ) -> None:
        try:
            obj = await self.client.get(resource, name, namespace)
        except ApiError as exc:
            if exc.not_found:  # never made, or no CDI in this cluster
                return
            raise
        ref = controller_owner(obj)
        if ref is None or ref.get("uid") != uid(owner):
            return
        refs = thaw(meta(obj).get("ownerReferences") or [])
        ops: list[JsonPatchOp] = [
            {"op": "test", "path": "/metadata/ownerReferences", "value": refs},
            {
                "op": "replace",
                "path": "/metadata/ownerReferences",
                "value": [r for r in refs if r.get("uid") != uid(owner)],
            },
        ]
        await self.client.json_patch(resource, name, ops, namespace)
        log.info(
            "kept the state of a VM leaving its pool",
            vm=key(owner),
            kept=f"{resource.plural}/{name}",
        )

    async def _autoheal(
        self, pool_key: str, pool: RawObject, vms: list[RawObject], autohealing: Mapping[str, Any]
    ) -> None:
        """Replace VMs that keep failing to start (upstream's autohealing): delete them as a
        scale-in would; the scale-out that follows makes them again."""
        now = self.now()
        due: list[RawObject] = []
        later: list[float] = []
        for vm in vms:
            wait = heal_after(vm, autohealing, now)
            if wait == 0.0:
                due.append(vm)
            elif wait is not None:
                later.append(wait)
        if later:
            self.queue.add_after(pool_key, min(later) + 0.5)
        if due:
            live = [v for v in due if not deleting(v)]
            log.info("autohealing", pool=pool_key, vms=[key(v) for v in live])
            await self._scale_in(pool_key, pool, live, len(live))

    # -- update --------------------------------------------------------------------------

    def _revision_spec(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        revision = self.revisions.get_raw(f"{namespace}/{name}")
        return mapping(revision.get("data")) if revision is not None else None

    async def _ensure_revision(self, pool_key: str, pool: RawObject) -> str:
        """The name of the ControllerRevision of the pool's current spec, made if missing."""
        name = revision_name(pool)
        namespace = str(meta(pool).get("namespace"))
        if self.revisions.get_raw(f"{namespace}/{name}") is not None:
            return name
        body = {
            "apiVersion": "apps/v1",
            "kind": "ControllerRevision",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "ownerReferences": [owner_ref(pool, VIRTUAL_MACHINE_POOLS.api_version, POOL_KIND)],
            },
            "data": thaw(pool.get("spec")),
            "revision": int(meta(pool).get("generation") or 0),
        }
        self.expectations.expect_creations(pool_key, 1)
        try:
            await self.client.create(CONTROLLER_REVISIONS, body)
        except ApiError as exc:
            self.expectations.creation_observed(pool_key)
            if not exc.conflict:
                raise
        return name

    async def _update(self, pool_key: str, pool: RawObject, vms: list[RawObject]) -> bool:
        """Opportunistic, then (unless opted out) proactive update; True when no VM is outdated."""
        spec = mapping(pool.get("spec"))
        strategy = mapping(spec.get("updateStrategy"))
        if strategy.get("unmanaged") is not None:
            return True
        proactive = mapping(strategy.get("proactive"))
        selection = mapping(proactive.get("selectionPolicy"))
        candidates = [v for v in vms if not deleting(v)]
        if selection.get("selectors") is not None:
            candidates = select_by(candidates, mapping(selection.get("selectors")))
        namespace = str(meta(pool).get("namespace"))
        outdated: list[RawObject] = []
        current: list[RawObject] = []
        for vm in candidates:
            revision = labels(vm).get(REVISION_LABEL)
            found = self._revision_spec(namespace, revision) if revision else None
            (outdated if vm_outdated(spec, vm, found) else current).append(vm)
        if outdated:
            revision = await self._ensure_revision(pool_key, pool)
            errors = await in_bursts(outdated, lambda vm: self._rewrite_vm(pool, vm, revision))
            if errors:
                raise errors[0]
        if strategy.get("opportunistic") is None:
            await self._proactive_update(pool_key, pool, current, selection)
        return not outdated

    async def _rewrite_vm(self, pool: RawObject, vm: RawObject, revision: str) -> None:
        """Write the pool's template into an outdated VM (labels, annotations, spec)."""
        want = self._vm_body(pool, str(meta(vm).get("name")), revision)
        _keep_identity(mapping(vm.get("spec")), want["spec"])
        rv = meta(vm).get("resourceVersion")
        ops: list[JsonPatchOp] = [{"op": "test", "path": "/metadata/resourceVersion", "value": rv}]
        # As upstream, labels and annotations become the template's (plus the revision).
        for field in ("labels", "annotations"):
            have, value = thaw(meta(vm).get(field)) or None, want["metadata"].get(field)
            if have == value:
                continue
            if value is None:
                ops.append({"op": "remove", "path": f"/metadata/{field}"})
            else:
                ops.append({"op": "add", "path": f"/metadata/{field}", "value": value})
        if thaw(vm.get("spec")) != want["spec"]:
            ops.append({"op": "replace", "path": "/spec", "value": want["spec"]})
        name, namespace = str(meta(vm).get("name")), str(meta(vm).get("namespace"))
        try:
            await self.client.json_patch(VIRTUAL_MACHINES, name, ops, namespace)
        except ApiError as exc:
            await self._event(
                pool,
                "Warning",
                "FailedUpdate",
                f"Error updating virtual machine {namespace}/{name}: {exc}",
            )
            raise
        await self._event(pool, "Normal", "SuccessfulUpdate", f"Updated VM {namespace}/{name}")

    def _vmi_of(self, vm: RawObject) -> RawObject | None:
        vmi = self.vmis.get_raw(key(vm))
        ref = controller_owner(vmi) if vmi is not None else None
        return vmi if ref is not None and ref.get("uid") == uid(vm) else None

    async def _proactive_update(
        self, pool_key: str, pool: RawObject, current: list[RawObject], selection: Mapping[str, Any]
    ) -> None:
        namespace = str(meta(pool).get("namespace"))

        def revision_of(name: str) -> Mapping[str, Any] | None:
            return self._revision_spec(namespace, name)

        handled: set[str] = set()
        # VMs not ready first: restarting them costs no availability (as upstream).
        for vm in current:
            vmi = self._vmi_of(vm)
            if _ready(vm) or vmi is None or deleting(vmi):
                continue
            kind = vmi_update(vm, vmi, revision_of)
            if kind is not UpdateKind.NONE:
                await self._apply_update(pool, vm, vmi, kind)
                handled.add(uid(vm))
        budget = max_unavailable(mapping(pool.get("spec"))) - sum(
            1 for vm in current if not _vmi_ready(self._vmi_of(vm))
        )
        if mapping(mapping(pool.get("spec")).get("updateStrategy")).get("proactive") is not None:
            current = sort_by_policy(current, selection, self.rng)
        for vm in current:
            vmi = self._vmi_of(vm)
            if uid(vm) in handled or vmi is None:
                continue
            kind = vmi_update(vm, vmi, revision_of)
            if kind is UpdateKind.NONE:
                continue
            if budget <= 0:
                log.info("proactive update waits on maxUnavailable", pool=pool_key)
                self.queue.add_after(pool_key, RETRY_DELAY)
                return
            await self._apply_update(pool, vm, vmi, kind)
            budget -= 1

    async def _apply_update(
        self, pool: RawObject, vm: RawObject, vmi: RawObject, kind: UpdateKind
    ) -> None:
        name, namespace = str(meta(vm).get("name")), str(meta(vm).get("namespace"))
        try:
            if kind is UpdateKind.RESTART:
                await self.client.delete(VIRTUAL_MACHINE_INSTANCES, name, namespace, uid=uid(vmi))
            elif kind is UpdateKind.DELETE_VM:
                await self.client.delete(
                    VIRTUAL_MACHINES, name, namespace, uid=uid(vm), propagation="Foreground"
                )
            elif kind is UpdateKind.LABEL:
                current = thaw(meta(vmi).get("labels"))
                wanted = {**(current or {}), REVISION_LABEL: labels(vm)[REVISION_LABEL]}
                ops: list[JsonPatchOp] = (
                    [{"op": "add", "path": "/metadata/labels", "value": wanted}]
                    if current is None
                    else [
                        {"op": "test", "path": "/metadata/labels", "value": current},
                        {"op": "replace", "path": "/metadata/labels", "value": wanted},
                    ]
                )
                await self.client.json_patch(VIRTUAL_MACHINE_INSTANCES, name, ops, namespace)
        except ApiError as exc:
            if exc.not_found or exc.conflict:
                return
            await self._event(
                pool,
                "Warning",
                "FailedUpdate",
                f"Error updating resource {namespace}/{name}: {exc}",
            )
            raise
        log.info("proactive update", vm=f"{namespace}/{name}", how=kind.value)
        await self._event(
            pool, "Normal", "SuccessfulDelete", f"Successfully updated resource {namespace}/{name}"
        )

    async def _prune_revisions(self, pool: RawObject, vms: Sequence[RawObject]) -> None:
        """Delete the pool's revisions no VM or VMI of it comes from any more."""
        used = {labels(vm).get(REVISION_LABEL) for vm in vms}
        used |= {labels(vmi).get(REVISION_LABEL) for vm in vms if (vmi := self._vmi_of(vm))}
        for revision in self.revisions.store.by_index(OWNER_INDEX, uid(pool)):
            name = str(meta(revision).get("name"))
            if name in used:
                continue
            try:
                await self.client.delete(
                    CONTROLLER_REVISIONS,
                    name,
                    str(meta(revision).get("namespace")),
                    uid=uid(revision),
                )
            except ApiError as exc:
                if not (exc.not_found or exc.conflict):
                    raise

    # -- deletion, finalizers ------------------------------------------------------------

    async def _let_go(self, pool: RawObject, vms: Sequence[RawObject]) -> None:
        """A deleted pool lets go of its VMs (the garbage collector deletes them), then itself."""
        for vm in vms:
            await set_finalizer(self.client, VIRTUAL_MACHINES, vm, POOL_FINALIZER, False)
        await set_finalizer(self.client, VIRTUAL_MACHINE_POOLS, pool, POOL_FINALIZER, False)

    # -- status --------------------------------------------------------------------------

    async def _update_status(
        self, pool: RawObject, vms: Sequence[RawObject], failure: SyncError | None
    ) -> None:
        spec = mapping(pool.get("spec"))
        now = self.now()
        conditions = list(mapping(pool.get("status")).get("conditions") or ())
        had_failure = condition(pool, "ReplicaFailure") is not None
        if failure is not None and not had_failure:
            conditions = upsert_condition(
                conditions,
                "ReplicaFailure",
                "True",
                now,
                reason=failure.reason,
                message=failure.message,
            )
            await self._event(pool, "Warning", failure.reason, failure.message)
        elif failure is None and had_failure:
            conditions = upsert_condition(conditions, "ReplicaFailure", None, now)
        paused = bool(spec.get("paused"))
        was_paused = condition(pool, "ReplicaPaused") is not None
        if paused and not was_paused:
            conditions = upsert_condition(
                conditions,
                "ReplicaPaused",
                "True",
                now,
                reason="SuccessfulPaused",
                message="Pool controller is paused",
            )
            await self._event(pool, "Normal", "SuccessfulPaused", "Pool is paused")
        elif not paused and was_paused:
            conditions = upsert_condition(conditions, "ReplicaPaused", None, now)
            await self._event(pool, "Normal", "SuccessfulResume", "Pool is unpaused")
        wanted: dict[str, Any] = {
            "replicas": len(vms),
            "readyReplicas": sum(1 for vm in vms if _ready(vm)),
            "labelSelector": selector_string(mapping(spec.get("selector"))),
            "conditions": conditions,
        }
        await patch_status_if_changed(self.client, VIRTUAL_MACHINE_POOLS, pool, wanted)

    async def _disown(self, pool: RawObject, vm: RawObject) -> None:
        """A VM whose labels left the selector stops being the pool's (ownerReference and
        finalizer removed), as upstream releases detached VMs; a replacement follows."""
        m = meta(vm)
        refs = thaw(m.get("ownerReferences") or [])
        ops: list[JsonPatchOp] = [
            {"op": "test", "path": "/metadata/uid", "value": uid(vm)},
            {"op": "test", "path": "/metadata/ownerReferences", "value": refs},
            {
                "op": "replace",
                "path": "/metadata/ownerReferences",
                "value": [r for r in refs if r.get("uid") != uid(pool)],
            },
        ]
        finalizers = list(m.get("finalizers") or ())
        if POOL_FINALIZER in finalizers:
            ops += [
                {"op": "test", "path": "/metadata/finalizers", "value": finalizers},
                {
                    "op": "replace",
                    "path": "/metadata/finalizers",
                    "value": [f for f in finalizers if f != POOL_FINALIZER],
                },
            ]
        try:
            await self.client.json_patch(VIRTUAL_MACHINES, str(m["name"]), ops, str(m["namespace"]))
        except ApiError as exc:
            if not (exc.not_found or exc.status == 422):  # gone, or changed meanwhile
                raise
        log.info("released a VM the selector no longer matches", vm=key(vm), pool=key(pool))

    async def _event(self, pool: RawObject, type_: Any, reason: str, message: str) -> None:
        if self.recorder is not None:
            await self.recorder.event(pool, type_, reason, message)


def _preserves(strategy: Mapping[str, Any]) -> bool:
    """Whether a scale-in strategy's statePreservation keeps the VM's volumes (Offline,
    Online; upstream's default is Disabled)."""
    return strategy.get("statePreservation") not in (None, "Disabled")


def _ready(vm: RawObject) -> bool:
    """A VM counts as ready with its Ready condition True (upstream's readyReplicas)."""
    c = condition(vm, "Ready")
    return c is not None and c.get("status") == "True"


def _vmi_ready(vmi: RawObject | None) -> bool:
    if vmi is None or deleting(vmi) or phase(vmi) != "Running":
        return False
    c = condition(vmi, "Ready")
    return c is not None and c.get("status") == "True"


def _keep_identity(old_spec: Mapping[str, Any], new_spec: dict[str, Any]) -> None:
    """Firmware uuid and serial identify the VM to its guest: an update keeps them."""
    old_fw = mapping(
        mapping(mapping(mapping(old_spec.get("template")).get("spec")).get("domain")).get(
            "firmware"
        )
    )
    kept = {k: old_fw[k] for k in ("uuid", "serial") if old_fw.get(k)}
    if not kept:
        return
    domain = new_spec.setdefault("template", {}).setdefault("spec", {}).setdefault("domain", {})
    domain.setdefault("firmware", {}).update(kept)
