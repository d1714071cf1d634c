"""The VMI controller: one launcher pod per VMI, and the VMI's phase from that pod.

Pending (pod created) -> Scheduling (pod seen) -> Scheduled (pod bound to a node: status.nodeName
and the `kubevirt.io/nodeName` label tell virt-handler); Failed when the pod fails or vanishes.
Pods belong to a VMI only through a controller ownerReference (labels alone never count).
Migration target pods (labelled with the job's uid) are created by the migration controller;
the VMI's pod is always its current one (upstream's rule): the newest pod on the VMI's node,
so a finished migration's target pod takes over once virt-handler moves status.nodeName.
A VMI on Multus networks gets its pod only once every NetworkAttachmentDefinition it
names exists (as upstream's render): otherwise Synchronized=False and a Warning event,
reason FailedCreate, say which is missing (or that Multus is not installed at all), and
the VMI is retried with back-off.

Writes are folded (upstream writes each phase; we write what a reader can act on): virt-api
admits a VMI already Pending with our finalizer, so creating the pod writes nothing to the
VMI; a pod the scheduler binds goes from Pending to Scheduled in one write (its stamps
still name every phase passed). Scheduling is written only for a pod the scheduler
refused (PodScheduled False, whose reason the VMI then carries) or left unbound for
SCHEDULING_GRACE: in a mass start the scheduler binds some 50 pods a second, and a
Scheduling write for each queued pod would double the API server's work for nothing a
reader can act on. The pod's readiness-gate condition is written once the kubelet has
taken the pod (its ``startTime``), before its containers can be ready, not while the
scheduler is busy with it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from typing import Any

import structlog
from kube_runtime import (
    PERSISTENT_VOLUME_CLAIMS,
    PODS,
    VIRTUAL_MACHINE_INSTANCES,
    ApiError,
    Event,
    EventRecorder,
    EventType,
    KubeClient,
    RawObject,
    SharedInformer,
    UnseenWrites,
    WorkQueue,
    thaw,
)
from kubevirt_api import InvalidObjectError, VirtualMachineInstance, load
from kubevirt_api.conditions import (
    IMAGE_PULL_REASONS,
    image_pull_error,
    same_condition,
    vmi_ready_condition,
)
from kubevirt_api.enums import FINAL_POD_PHASES, FINAL_VMI_PHASES, PodPhase
from kubevirt_api.enums import VirtualMachineInstancePhase as Phase
from kubevirt_api.event_reasons import (
    FAILED_CREATE,
    FAILED_DELETE,
    SUCCESSFUL_CREATE,
    SUCCESSFUL_DELETE,
)
from kubevirt_api.migrations import live_migratable, migratable_on_eviction

from .backend_storage import (
    FAILED_BACKEND_STORAGE,
    backend_claim,
    backend_claim_name,
    needs_backend_storage,
)
from .claims import (
    PVC_NOT_FOUND_REASON,
    Claim,
    block_volumes,
    claim_names,
    missing_claim,
    volume_status,
)
from .config import ControllerConfig
from .expectations import Expectations
from .hotplug import hotplug_volume_status, plan_attachment
from .launcher_pod import RenderError, render_launcher_pod
from .metrics import ControllerMetrics
from .multus import missing_attachment
from .objects import (
    condition,
    controller_owner,
    deleting,
    format_time,
    key,
    labels,
    mapping,
    meta,
    parse_time,
    phase,
    same_conditions,
    uid,
    upsert_condition,
)
from .vmstats import vmi_info_labels
from .wellknown import MIGRATION_JOB_LABEL, NODE_NAME_LABEL, READINESS_GATE, VMI_FINALIZER

__all__ = [
    "OWNER_INDEX",
    "PodCreationBlockedError",
    "VmiController",
    "current_pod",
    "pod_owner_key",
]

log = structlog.get_logger(__name__)

OWNER_INDEX = "controller-uid"
Now = Callable[[], dt.datetime]
#: How long a new pod may wait for the scheduler, with no verdict from it, before
#: Scheduling is written.
SCHEDULING_GRACE = 30.0


def pod_owner_key(pod: RawObject) -> str | None:
    """The VMI key of a pod's controlling VMI, or None (label-only pods are not ours)."""
    ref = controller_owner(pod)
    if ref is None or ref.get("kind") != "VirtualMachineInstance":
        return None
    namespace = meta(pod).get("namespace")
    return f"{namespace}/{ref.get('name')}"


def current_pod(vmi: RawObject, pods: list[RawObject]) -> RawObject | None:
    """The VMI's current pod among its own: the newest on its node (any node while it has
    none); a live pod wins over one being deleted. A migration target elsewhere is not it."""
    node = mapping(vmi.get("status")).get("nodeName")
    here = [p for p in pods if not node or mapping(p.get("spec")).get("nodeName") == node]
    if not here:
        return None
    return max(here, key=lambda p: (not deleting(p), str(meta(p).get("creationTimestamp") or "")))


def _ready_and_pull_conditions(
    conditions: list[Any], new_phase: str, pod: RawObject | None, now: dt.datetime
) -> list[Any]:
    """Ready mirrored from the pod, and Synchronized=False with the kubelet's reason while
    the pod's image cannot be pulled (upstream's rules; the reason, not the message, decides
    whether the condition is rewritten)."""
    stamp = format_time(now)
    ready = vmi_ready_condition(new_phase == Phase.RUNNING, pod, stamp)
    current = next((c for c in conditions if mapping(c).get("type") == "Ready"), None)
    if not same_condition(current, ready):
        conditions = [*(c for c in conditions if mapping(c).get("type") != "Ready"), ready]
    if new_phase in FINAL_VMI_PHASES or new_phase == Phase.RUNNING:
        return conditions
    pull = image_pull_error(pod)
    synced = next((c for c in conditions if mapping(c).get("type") == "Synchronized"), None)
    if pull is not None:
        if synced is None or synced.get("reason") != pull[0]:
            conditions = upsert_condition(
                conditions, "Synchronized", "False", now, reason=pull[0], message=pull[1]
            )
    elif synced is not None and synced.get("reason") in IMAGE_PULL_REASONS:
        conditions = upsert_condition(conditions, "Synchronized", None, now)
    return conditions


class PodCreationBlockedError(Exception):
    """The launcher pod cannot be created yet (status says why); retry with back-off."""


class VmiController:
    """Reconciles VMIs by key; wire `on_vmi`/`on_pod` to the informers."""

    def __init__(
        self,
        client: KubeClient,
        vmis: SharedInformer[RawObject],
        pods: SharedInformer[RawObject],
        queue: WorkQueue[str],
        config: Callable[[], ControllerConfig],
        metrics: ControllerMetrics,
        *,
        recorder: EventRecorder | None = None,
        now: Now | None = None,
        claims: SharedInformer[RawObject] | None = None,
        attachment_pods: SharedInformer[RawObject] | None = None,
    ) -> None:
        self.client = client
        self.vmis = vmis
        self.pods = pods
        self.claims = claims
        self.attachment_pods = attachment_pods
        self.queue = queue
        self.config = config
        self.metrics = metrics
        self.recorder = recorder
        self.expectations = Expectations(queue.clock)
        self.now = now or (lambda: dt.datetime.now(dt.UTC))
        #: When each VMI's current pod was first seen unbound (monotonic seconds).
        self._unbound_since: dict[str, float] = {}
        #: Our VMI and pod writes the informers have not shown yet: no pass computes from
        #: the version a write replaced (its refused or repeated write would follow).
        self.unseen_vmis = UnseenWrites()
        self.unseen_pods = UnseenWrites()

    # -- event handlers ---------------------------------------------------------------------

    def on_vmi(self, event: Event[RawObject]) -> None:
        self.queue.add(event.key)
        if event.type.value == "DELETED":
            self.metrics.set_vmi(event.key, None)
            self.metrics.set_non_evictable(event.key, None)

    def on_pod(self, event: Event[RawObject]) -> None:
        owner = pod_owner_key(event.raw)
        if owner is None:
            return
        created_here = MIGRATION_JOB_LABEL not in labels(event.raw)
        if event.type.value == "ADDED" and event.old_raw is None and created_here:
            self.expectations.creation_observed(owner)
        elif event.type.value == "DELETED":
            self.expectations.deletion_observed(owner, uid(event.raw))
        self.queue.add(owner)

    def on_attachment_pod(self, event: Event[RawObject]) -> None:
        """A hotplug attachment pod changed: the VMI of the launcher pod that owns it."""
        owner = controller_owner(event.raw)
        if owner is None or owner.get("kind") != "Pod":
            return
        launcher = self.pods.get_raw(f"{meta(event.raw).get('namespace')}/{owner.get('name')}")
        vmi_key = pod_owner_key(launcher) if launcher is not None else None
        if vmi_key is not None:
            self.queue.add(vmi_key)

    def on_claim(self, event: Event[RawObject]) -> None:
        """A claim changed: the VMIs of its namespace that use it (their pod may wait for
        it; their volumeStatus shows it)."""
        m = meta(event.raw)
        namespace, name = m.get("namespace"), m.get("name")
        for vmi in self.vmis.store.objects():
            if meta(vmi).get("namespace") == namespace and name in claim_names(vmi):
                self.queue.add(key(vmi))

    def claim(self, namespace: str, name: str) -> Claim | None:
        """The claim from the informer (None when missing, or without a claim informer)."""
        if self.claims is None:
            return None
        raw = self.claims.get_raw(f"{namespace}/{name}")
        return Claim.from_raw(raw) if raw is not None else None

    # -- reconcile --------------------------------------------------------------------------

    def owned_pods(self, vmi: RawObject) -> list[RawObject]:
        """Pods whose controller ownerReference is this VMI (by uid)."""
        return self.pods.store.by_index(OWNER_INDEX, uid(vmi))

    async def reconcile(self, vmi_key: str) -> None:
        vmi = self.vmis.get_raw(vmi_key)
        if vmi is None:
            self.expectations.forget(vmi_key)
            self._unbound_since.pop(vmi_key, None)
            self.unseen_vmis.forget(vmi_key)
            return
        if self.unseen_vmis.pending(vmi_key, vmi):
            return  # our last write's watch event brings the key back
        pods = self.owned_pods(vmi)
        own = current_pod(vmi, pods)
        current = phase(vmi)
        if deleting(vmi) or current in FINAL_VMI_PHASES:
            await self._wind_down(vmi_key, vmi, pods)
            self._export(vmi_key, vmi)
            return
        # Metadata we own rides along with the status in one guarded patch.
        meta_patch: dict[str, Any] = {}
        finalizers = list(meta(vmi).get("finalizers") or ())
        if VMI_FINALIZER not in finalizers:
            meta_patch["finalizers"] = [*finalizers, VMI_FINALIZER]
        status = mapping(vmi.get("status"))
        new_phase = current or Phase.PENDING
        node = status.get("nodeName")
        conditions = list(status.get("conditions") or ())
        now = self.now()
        blocked = ""
        if own is None:
            if current in (Phase.SCHEDULING, Phase.SCHEDULED, Phase.RUNNING):
                new_phase = Phase.FAILED  # the pod went away under us
                status_reason = "PodNotExists"
            elif self.expectations.satisfied(vmi_key):
                conditions, blocked = await self._create_pod(vmi_key, vmi, conditions, now)
                status_reason = ""
            else:
                status_reason = ""
        else:
            pod = own
            status_reason = ""
            pod_phase = phase(pod)
            bound = mapping(pod.get("spec")).get("nodeName")
            if pod_phase == PodPhase.FAILED:
                new_phase, status_reason = Phase.FAILED, "PodFailed"
            elif pod_phase == PodPhase.SUCCEEDED:
                new_phase = Phase.SUCCEEDED if current == Phase.RUNNING else Phase.FAILED
            elif new_phase == Phase.PENDING:
                new_phase = Phase.SCHEDULING
            if new_phase == Phase.SCHEDULING and bound:
                new_phase, node = Phase.SCHEDULED, bound
            scheduled = condition(pod, "PodScheduled")
            refused = scheduled is not None and scheduled.get("status") == "False"
            if self._await_binding(vmi_key, current, new_phase, pod, refused):
                self._export(vmi_key, vmi)
                return
            if _admitted(pod) and not deleting(pod) and pod_phase not in FINAL_POD_PHASES:
                await self._sync_readiness_gate(vmi, pod, now)
            if scheduled is not None and refused:
                conditions = upsert_condition(
                    conditions,
                    "PodScheduled",
                    "False",
                    now,
                    reason=str(scheduled.get("reason") or ""),
                    message=str(scheduled.get("message") or ""),
                )
            else:
                conditions = upsert_condition(conditions, "PodScheduled", None, now)
        conditions = _ready_and_pull_conditions(conditions, new_phase, own, now)
        active = {
            uid(p): str(mapping(p.get("spec")).get("nodeName") or "")
            for p in pods
            if phase(p) not in FINAL_POD_PHASES
        }
        if node and labels(vmi).get(NODE_NAME_LABEL) != node and new_phase not in FINAL_VMI_PHASES:
            meta_patch["labels"] = {NODE_NAME_LABEL: str(node)}
        serving = await self._sync_attachment(vmi, own, new_phase)
        await self._patch_status(
            vmi, new_phase, node, active, conditions, status_reason, now, meta_patch, serving
        )
        if new_phase in FINAL_VMI_PHASES:
            self.queue.add(vmi_key)  # wind down (delete the pod) on the next pass
        self._export(vmi_key, vmi, new_phase, node)
        if blocked:
            raise PodCreationBlockedError(blocked)

    def _await_binding(
        self, vmi_key: str, current: str, new_phase: str, pod: RawObject, refused: bool
    ) -> bool:
        """True while a Pending VMI's new pod waits for the scheduler within the grace
        (the VMI is looked at again when it ends); then, or as soon as the scheduler
        refused the pod, Scheduling is written."""
        if (
            new_phase != Phase.SCHEDULING
            or current not in ("", Phase.PENDING)
            or deleting(pod)
            or refused
        ):
            self._unbound_since.pop(vmi_key, None)
            return False
        clock = self.queue.clock.monotonic()
        since = self._unbound_since.setdefault(vmi_key, clock)
        left = SCHEDULING_GRACE - (clock - since)
        if left <= 0:
            return False
        self.queue.add_after(vmi_key, left)
        return True

    @staticmethod
    def _only_ready_changed(status: Mapping[str, Any], patch: Mapping[str, Any]) -> bool:
        """`patch` changes nothing but a Ready that is not True before or after."""
        if set(patch) != {"conditions"}:
            return False

        def split(found: Any) -> tuple[Any, list[Any]]:
            ready = [c for c in found if mapping(c).get("type") == "Ready"]
            return (ready[0] if ready else None), [c for c in found if c not in ready]

        before, kept = split(status.get("conditions") or ())
        after, wanted = split(patch["conditions"])
        return (
            same_conditions(kept, wanted)
            and mapping(before).get("status") != "True"
            and mapping(after).get("status") != "True"
        )

    def _export(
        self, vmi_key: str, vmi: RawObject, new_phase: str | None = None, node: object = None
    ) -> None:
        m = meta(vmi)
        status = mapping(vmi.get("status"))
        where = {
            "name": str(m.get("name") or ""),
            "namespace": str(m.get("namespace") or ""),
            "node": str(node or status.get("nodeName") or ""),
        }
        # As upstream, conservatively: no LiveMigratable condition yet counts as not migratable.
        migratable = live_migratable(vmi)
        blocked = migratable_on_eviction(vmi, self.config().cluster) and (
            migratable is None or migratable.get("status") != "True"
        )
        current = (new_phase or phase(vmi) or Phase.PENDING).lower()
        info = {**where, "phase": current, **vmi_info_labels(vmi, evictable=not blocked)}
        self.metrics.set_vmi(vmi_key, info)
        self.metrics.set_non_evictable(vmi_key, where, blocked)

    def _observe_phase(
        self, vmi: RawObject, new_phase: str, old: str, since_creation: float, now: dt.datetime
    ) -> None:
        status = mapping(vmi.get("status"))
        entered = [
            parse_time(s.get("phaseTransitionTimestamp"))
            for s in status.get("phaseTransitionTimestamps") or ()
            if isinstance(s, Mapping) and s.get("phase") == old
        ]
        last = max((t for t in entered if t is not None), default=None)
        deleted = parse_time(meta(vmi).get("deletionTimestamp"))
        self.metrics.observe_phase(
            new_phase,
            since_creation,
            since_previous=(now - last).total_seconds() if last is not None else None,
            since_deletion=(now - deleted).total_seconds() if deleted is not None else None,
            previous=old,
        )

    async def _wind_down(self, vmi_key: str, vmi: RawObject, pods: list[RawObject]) -> None:
        """A finished or deleted VMI: delete its pods, then drop our finalizer."""
        remaining = [p for p in pods if phase(p) not in FINAL_POD_PHASES or deleting(vmi)]
        to_delete = [p for p in remaining if not deleting(p)]
        if to_delete and self.expectations.satisfied(vmi_key):
            self.expectations.expect_deletions(vmi_key, [uid(p) for p in to_delete])
            for pod in to_delete:
                try:
                    await self.client.delete(
                        PODS, str(meta(pod)["name"]), str(meta(pod)["namespace"]), uid=uid(pod)
                    )
                    log.info("deleted launcher pod", pod=meta(pod).get("name"))
                except ApiError as exc:
                    self.expectations.deletion_observed(vmi_key, uid(pod))
                    if not (exc.not_found or exc.conflict):
                        await self._event(
                            vmi,
                            "Warning",
                            FAILED_DELETE,
                            f"Failed to delete virtual machine pod {meta(pod).get('name')}",
                        )
                        raise
                    continue
                await self._event(
                    vmi,
                    "Normal",
                    SUCCESSFUL_DELETE,
                    f"Deleted virtual machine pod {meta(pod).get('name')}",
                )
        if not remaining and VMI_FINALIZER in (meta(vmi).get("finalizers") or ()):
            await self._remove_finalizer(vmi)

    async def _create_pod(
        self, vmi_key: str, vmi: RawObject, conditions: list[Any], now: dt.datetime
    ) -> tuple[list[Any], str]:
        """The conditions after trying; and, when the pod must wait, why (else "")."""
        backend = needs_backend_storage(vmi)
        if backend:
            failure = await self._ensure_backend_claim(vmi)
            if failure is not None:
                failed = upsert_condition(
                    conditions,
                    "Synchronized",
                    "False",
                    now,
                    reason=FAILED_BACKEND_STORAGE,
                    message=failure,
                )
                return failed, failure
        missing = missing_claim(vmi, self.claim) if self.claims is not None else None
        if missing is not None:
            log.info("launcher pod waits for its claims", reason=missing)
            before = condition(vmi, "Synchronized")
            if self.recorder is not None and (before or {}).get("message") != missing:
                await self.recorder.event(vmi, "Normal", PVC_NOT_FOUND_REASON, missing)
            failed = upsert_condition(
                conditions,
                "Synchronized",
                "False",
                now,
                reason=PVC_NOT_FOUND_REASON,
                message=missing,
            )
            return failed, missing
        try:
            raw = thaw(vmi)
            typed = load(VirtualMachineInstance, raw)
            body = render_launcher_pod(
                typed,
                self.config(),
                block_volumes=block_volumes(vmi, self.claim),
                backend_claim=backend_claim_name(vmi) if backend else None,
                raw=raw,
            )
        except (InvalidObjectError, RenderError) as exc:
            log.warning("cannot render launcher pod", error=str(exc))
            failed = upsert_condition(
                conditions, "Synchronized", "False", now, reason="FailedCreate", message=str(exc)
            )
            return failed, ""
        missing = await missing_attachment(self.client, typed)
        if missing is not None:
            log.warning("launcher pod waits for its networks", reason=missing)
            before = condition(vmi, "Synchronized")
            if (before or {}).get("message") != missing:
                await self._event(vmi, "Warning", FAILED_CREATE, missing)
            failed = upsert_condition(
                conditions, "Synchronized", "False", now, reason="FailedCreate", message=missing
            )
            return failed, missing
        self.expectations.expect_creations(vmi_key, 1)
        try:
            created = await self.client.create(PODS, body)
        except ApiError as exc:
            self.expectations.creation_observed(vmi_key)
            log.warning("launcher pod create failed", error=str(exc))
            await self._event(vmi, "Warning", FAILED_CREATE, f"Error creating pod: {exc}")
            failed = upsert_condition(
                conditions, "Synchronized", "False", now, reason="FailedCreate", message=str(exc)
            )
            return failed, ""
        name = mapping(created.get("metadata")).get("name")
        log.info("created launcher pod", pod=name)
        await self._event(vmi, "Normal", SUCCESSFUL_CREATE, f"Created virtual machine pod {name}")
        return upsert_condition(conditions, "Synchronized", None, now), ""

    async def _sync_attachment(
        self, vmi: RawObject, launcher: RawObject | None, new_phase: str
    ) -> Mapping[str, RawObject]:
        """A running VMI's hotplug attachment pods (hotplug.py); which pod holds each volume."""
        if (
            self.attachment_pods is None
            or launcher is None
            or new_phase != Phase.RUNNING
            or phase(launcher) != PodPhase.RUNNING
        ):
            return {}
        pods = self.attachment_pods.store.by_index(OWNER_INDEX, uid(launcher))
        config = self.config()
        plan = plan_attachment(
            vmi, launcher, pods, self.claim, config.launcher_image, config.image_pull_policy
        )
        if plan.create is not None:
            try:
                created = await self.client.create(PODS, plan.create)
            except ApiError as exc:
                await self._event(
                    vmi, "Warning", FAILED_CREATE, f"Error creating attachment pod: {exc}"
                )
                raise
            name = mapping(created.get("metadata")).get("name")
            log.info("created hotplug attachment pod", vmi=key(vmi), pod=name)
            await self._event(vmi, "Normal", SUCCESSFUL_CREATE, f"Created attachment pod {name}")
        for pod in plan.delete:
            m = meta(pod)
            try:
                await self.client.delete(PODS, str(m.get("name")), str(m.get("namespace")))
            except ApiError as exc:
                if not exc.not_found:
                    raise
            log.info("deleted hotplug attachment pod", vmi=key(vmi), pod=m.get("name"))
            await self._event(
                vmi, "Normal", SUCCESSFUL_DELETE, f"Deleted attachment pod {m.get('name')}"
            )
        return plan.serving

    async def _ensure_backend_claim(self, vmi: RawObject) -> str | None:
        """Create the VMI's backend-storage claim unless it exists; a failure's message."""
        m = meta(vmi)
        name = backend_claim_name(vmi)
        if self.claims is not None and self.claims.get_raw(f"{m.get('namespace')}/{name}"):
            return None
        body = backend_claim(vmi, self.config().cluster.vm_state_storage_class)
        try:
            await self.client.create(PERSISTENT_VOLUME_CLAIMS, body)
        except ApiError as exc:
            if exc.status == 409:
                return None  # made meanwhile (or by an earlier pass the cache has not seen)
            message = f"failed to create backend storage claim {name}: {exc}"
            await self._event(vmi, "Warning", FAILED_BACKEND_STORAGE, message)
            return message
        log.info("created backend storage claim", claim=name)
        await self._event(vmi, "Normal", SUCCESSFUL_CREATE, f"Created backend storage claim {name}")
        return None

    async def _event(self, vmi: RawObject, type_: EventType, reason: str, message: str) -> None:
        if self.recorder is not None:
            await self.recorder.event(vmi, type_, reason, message)

    async def _sync_readiness_gate(self, vmi: RawObject, pod: RawObject, now: dt.datetime) -> None:
        """The pod's readiness gate condition: True unless the VMI is paused (as upstream).

        Written once the kubelet has taken the pod (`_admitted`): its containers take a
        second or more to start, so the gate is there before they are ready and the pod
        turns Ready in the kubelet's own status write, as with an earlier gate.
        """
        paused = condition(vmi, "Paused")
        want = "False" if paused is not None and paused.get("status") == "True" else "True"
        current = condition(pod, READINESS_GATE)
        if current is not None and current.get("status") == want:
            return
        pod_key = key(pod)
        if self.unseen_pods.pending(pod_key, pod):
            return  # the gate was written; the pod's cached copy is older
        gate = {
            "type": READINESS_GATE,
            "status": want,
            "lastProbeTime": None,
            "lastTransitionTime": format_time(now),
        }
        m = meta(pod)
        # A strategic merge patch merges conditions by type, so the scheduler's and the
        # kubelet's conditions written meanwhile survive; the uid is a precondition.
        body = {"metadata": {"uid": uid(pod)}, "status": {"conditions": [gate]}}
        try:
            updated = await self.client.request(
                "PATCH",
                PODS.path(str(m["namespace"]), str(m["name"]), "status"),
                body=body,
                content_type="application/strategic-merge-patch+json",
                verb="patch",
                resource="pods",
            )
        except ApiError as exc:
            if not (exc.not_found or exc.conflict):
                raise
            return
        self.unseen_pods.wrote(pod_key, pod, updated)

    async def _remove_finalizer(self, vmi: RawObject) -> None:
        finalizers = list(meta(vmi).get("finalizers") or ())
        kept = [f for f in finalizers if f != VMI_FINALIZER]
        await self._json_patch(
            vmi,
            [
                {"op": "test", "path": "/metadata/finalizers", "value": finalizers},
                {"op": "replace", "path": "/metadata/finalizers", "value": kept},
            ],
        )

    async def _json_patch(self, vmi: RawObject, ops: list[Any]) -> RawObject | None:
        """Apply `ops` (guarded by the uid); the updated object, or None if it is gone."""
        m = meta(vmi)
        ops = [{"op": "test", "path": "/metadata/uid", "value": uid(vmi)}, *ops]
        try:
            updated = await self.client.json_patch(
                VIRTUAL_MACHINE_INSTANCES, str(m["name"]), ops, str(m["namespace"])
            )
        except ApiError as exc:
            if exc.not_found:
                return None
            raise
        self.unseen_vmis.wrote(key(vmi), vmi, updated)
        return updated if isinstance(updated, Mapping) else None

    async def _patch_status(
        self,
        vmi: RawObject,
        new_phase: str,
        node: object,
        active: Mapping[str, str],
        conditions: list[Any],
        reason: str,
        now: dt.datetime,
        meta_patch: dict[str, Any],
        serving: Mapping[str, RawObject] | None = None,
    ) -> None:
        status = mapping(vmi.get("status"))
        patch: dict[str, Any] = {}
        if status.get("phase") != new_phase:
            patch["phase"] = new_phase
            stamps = [thaw(s) for s in status.get("phaseTransitionTimestamps") or ()]
            # A pod seen already bound still passes through the phases in order.
            order: list[str] = [Phase.PENDING, Phase.SCHEDULING, Phase.SCHEDULED]
            old = str(status.get("phase") or "")
            if new_phase in order:
                start = order.index(old) + 1 if old in order else 0
                passed = order[start : order.index(new_phase) + 1]
            else:
                passed = [new_phase]
            for step in passed:
                stamps.append({"phase": step, "phaseTransitionTimestamp": format_time(now)})
            patch["phaseTransitionTimestamps"] = stamps
            created = parse_time(meta(vmi).get("creationTimestamp"))
            if created is not None:
                self._observe_phase(vmi, new_phase, old, (now - created).total_seconds(), now)
            if reason:
                patch["reason"] = reason
        if node and status.get("nodeName") != node:
            patch["nodeName"] = node
        if thaw(status.get("activePods") or {}) != dict(active):
            # A merge patch merges maps: name the pods that left with null.
            gone = {k: None for k in (status.get("activePods") or {}) if k not in active}
            patch["activePods"] = {**gone, **active}
        if not same_conditions(status.get("conditions") or (), conditions):
            patch["conditions"] = conditions
        if self.claims is not None:
            volumes = volume_status(vmi, self.claim)
            if self.attachment_pods is not None:
                volumes = hotplug_volume_status(vmi, volumes, serving or {}, self.claim)
            if thaw(status.get("volumeStatus") or []) != volumes:
                patch["volumeStatus"] = volumes
        if not meta_patch and self._only_ready_changed(status, patch):
            # A Ready that stays not-True (a new reason, or none yet) rides along with the
            # next write that is needed anyway (the pod's bind, a phase, a True Ready).
            return
        if not patch and not meta_patch:
            return
        m = meta(vmi)
        try:
            # VMIs have no status subresource (as upstream): patch the object, guarded by
            # its resourceVersion so a status written meanwhile is never overwritten.
            body: dict[str, Any] = {"metadata": dict(meta_patch)}
            if patch:
                body["status"] = patch
            if m.get("resourceVersion"):
                body["metadata"]["resourceVersion"] = m["resourceVersion"]
            updated = await self.client.merge_patch(
                VIRTUAL_MACHINE_INSTANCES, str(m["name"]), body, str(m["namespace"])
            )
        except ApiError as exc:
            if exc.not_found:
                return
            raise
        self.unseen_vmis.wrote(key(vmi), vmi, updated)
        log.info("vmi status", vmi=key(vmi), **{k: v for k, v in patch.items() if k == "phase"})


def _admitted(pod: RawObject) -> bool:
    """The pod's kubelet has taken it (the kubelet's first status write sets startTime)."""
    return bool(mapping(pod.get("status")).get("startTime"))
