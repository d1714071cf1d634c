"""The migration controller: the control-plane side of a live migration (upstream's).

For each VirtualMachineInstanceMigration it creates the target launcher pod (the VMI's pod
again, labelled with the migration's uid, kept off the source node by anti-affinity and
given the migration's addedNodeSelector), within parallelMigrationsPerCluster and
parallelOutboundMigrationsPerNode. Once that pod is ready it hands off: it writes the VMI's
status.migrationState (uid, nodes, pods, the resolved options and matched MigrationPolicy)
and labels the VMI `kubevirt.io/migrationTargetNodeName`, and the handlers do the rest.
The phase follows what they report (see migration_phase). A migration deleted before
hand-off fails (condition migrationAbortRequested) and its target pod is deleted; after
hand-off the controller asks the handlers to abort (abortRequested) and holds its finalizer
until the migration is final. Target pods stuck Pending are deleted after 5 minutes when
unschedulable, 15 in any case (per-migration annotations may shorten both). A final
migration gets the VMI's migrationState copied into its status; only the five newest final
migrations of a VMI are kept.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from typing import Any

import structlog
from kube_runtime import (
    PODS,
    VIRTUAL_MACHINE_INSTANCES,
    ApiError,
    Event,
    EventRecorder,
    KubeClient,
    RawObject,
    Resource,
    SharedInformer,
    WorkQueue,
    pointer,
    thaw,
)
from kube_runtime.events import EventType
from kubevirt_api import InvalidObjectError, MigrationPolicy, VirtualMachineInstance, dump, load
from kubevirt_api.enums import FINAL_MIGRATION_PHASES, FINAL_POD_PHASES
from kubevirt_api.enums import VirtualMachineInstanceMigrationPhase as Phase
from kubevirt_api.enums import VirtualMachineInstancePhase as VmiPhase
from kubevirt_api.migrations import (
    EVACUATION_MIGRATION_ANNOTATION,
    MIGRATION_FINALIZER,
    MIGRATION_JOB_LABEL,
    MIGRATION_TARGET_NODE_LABEL,
    PENDING_TIMEOUT_ANNOTATION,
    UNSCHEDULABLE_TIMEOUT_ANNOTATION,
)
from kubevirt_api.resources import VIRTUAL_MACHINE_INSTANCE_MIGRATIONS

from .claims import block_volumes_in_status
from .config import ControllerConfig
from .expectations import Expectations
from .image_delivery import uses_image_volumes
from .launcher_pod import RenderError, render_launcher_pod
from .metrics import ControllerMetrics
from .migration_phase import (
    ABORT_REQUESTED,
    decide,
    migration_state,
    running_phase,
)
from .migration_policy import match_policy, resolve_options
from .objects import (
    condition,
    controller_owner,
    deleting,
    format_time,
    labels,
    mapping,
    meta,
    parse_time,
    phase,
    pod_down,
    pod_ready,
    uid,
    upsert_condition,
)
from .vmi import OWNER_INDEX, current_pod
from .wellknown import APP_LABEL, CREATED_BY_LABEL, LAUNCHER_VALUE

__all__ = [
    "CATCH_ALL_PENDING_TIMEOUT",
    "FINALIZED_MIGRATIONS_KEPT",
    "UNSCHEDULABLE_PENDING_TIMEOUT",
    "MigrationController",
    "with_source_anti_affinity",
]

log = structlog.get_logger(__name__)

NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
#: Seconds a target pod may stay Pending while unschedulable, and for any reason.
UNSCHEDULABLE_PENDING_TIMEOUT = 300
CATCH_ALL_PENDING_TIMEOUT = 900
#: Final migrations kept per VMI; older ones (and their defunct pods) are deleted.
FINALIZED_MIGRATIONS_KEPT = 5
# How soon a migration waiting for capacity (the parallel limits) looks again.
CAPACITY_RETRY = 5.0
Now = Callable[[], dt.datetime]


def with_source_anti_affinity(pod: dict[str, Any], vmi_uid: str) -> dict[str, Any]:
    """`pod` required to avoid every node running a pod of the same VMI."""
    term = {
        "labelSelector": {"matchLabels": {CREATED_BY_LABEL: vmi_uid}},
        "topologyKey": "kubernetes.io/hostname",
    }
    affinity = pod["spec"].setdefault("affinity", {})
    anti = affinity.setdefault("podAntiAffinity", {})
    anti.setdefault("requiredDuringSchedulingIgnoredDuringExecution", []).append(term)
    return pod


def _timeout(migration: RawObject, annotation: str, default: int) -> int:
    """A per-migration timeout annotation (whole seconds), else `default`."""
    value = mapping(meta(migration).get("annotations")).get(annotation)
    try:
        return int(str(value)) if value is not None else default
    except ValueError:
        return default


def _unschedulable(pod: RawObject) -> bool:
    scheduled = condition(pod, "PodScheduled")
    return (
        scheduled is not None
        and scheduled.get("status") == "False"
        and scheduled.get("reason") == "Unschedulable"
    )


def _vmi_key(migration: RawObject) -> str:
    return f"{meta(migration).get('namespace')}/{mapping(migration.get('spec')).get('vmiName')}"


class MigrationController:
    """Reconciles VirtualMachineInstanceMigrations by key."""

    def __init__(
        self,
        client: KubeClient,
        migrations: SharedInformer[RawObject],
        vmis: SharedInformer[RawObject],
        pods: SharedInformer[RawObject],
        queue: WorkQueue[str],
        config: Callable[[], ControllerConfig],
        *,
        policies: SharedInformer[RawObject] | None = None,
        metrics: ControllerMetrics | None = None,
        recorder: EventRecorder | None = None,
        now: Now | None = None,
    ) -> None:
        self.client = client
        self.migrations = migrations
        self.vmis = vmis
        self.pods = pods
        self.policies = policies
        self.queue = queue
        self.config = config
        self.metrics = metrics
        self.recorder = recorder
        self.expectations = Expectations(queue.clock)
        self.now = now or (lambda: dt.datetime.now(dt.UTC))
        # Migrations handed off whose VMI write the informer has not shown yet (upstream's
        # handOffMap): a cancel then must abort through the handlers, not fail outright.
        self.handed_off: set[str] = set()

    # -- events -----------------------------------------------------------------------------

    def on_migration(self, event: Event[RawObject]) -> None:
        self.queue.add(event.key)
        if self.metrics is not None:
            self.metrics.observe_migration(event.raw, event.old_raw, self.now())
            self.metrics.count_migrations(self.migrations.store.objects())

    def on_vmi(self, event: Event[RawObject]) -> None:
        m = meta(event.raw)
        for mig in self.migrations.store.objects():
            if meta(mig).get("namespace") == m.get("namespace") and mapping(mig.get("spec")).get(
                "vmiName"
            ) == m.get("name"):
                self.queue.add(f"{m.get('namespace')}/{meta(mig).get('name')}")

    def on_pod(self, event: Event[RawObject]) -> None:
        job = labels(event.raw).get(MIGRATION_JOB_LABEL)
        if not job or controller_owner(event.raw) is None:
            return
        namespace = meta(event.raw).get("namespace")
        for mig in self.migrations.store.objects():
            if uid(mig) == job:
                mig_key = f"{namespace}/{meta(mig).get('name')}"
                if event.type.value == "ADDED" and event.old_raw is None:
                    self.expectations.creation_observed(mig_key)
                elif event.type.value == "DELETED":
                    self.expectations.deletion_observed(mig_key, uid(event.raw))
                self.queue.add(mig_key)

    # -- reconcile --------------------------------------------------------------------------

    async def reconcile(self, mig_key: str) -> None:
        mig = self.migrations.get_raw(mig_key)
        if mig is None:
            self.expectations.forget(mig_key)
            self.handed_off.discard(mig_key)
            return
        vmi = self.vmis.get_raw(_vmi_key(mig))
        if vmi is None:
            await self._update_status(mig_key, mig, None, None)
            if not deleting(mig):
                # As upstream: a migration of a VMI that is gone goes too.
                await self._delete(VIRTUAL_MACHINE_INSTANCE_MIGRATIONS, mig)
            return
        target = self._target_pod(mig, vmi)
        sync_error: ApiError | None = None
        if self.expectations.satisfied(mig_key):
            try:
                await self._sync(mig_key, mig, vmi, target)
            except ApiError as exc:
                sync_error = exc
        new_phase = await self._update_status(mig_key, mig, vmi, target)
        if sync_error is not None:
            raise sync_error
        if new_phase in FINAL_MIGRATION_PHASES:
            await self._collect_garbage(vmi)
            self._requeue_pending()

    def _target_pod(self, mig: RawObject, vmi: RawObject) -> RawObject | None:
        for pod in self.pods.store.by_index(OWNER_INDEX, uid(vmi)):
            pod_labels = labels(pod)
            ours = pod_labels.get(MIGRATION_JOB_LABEL) == uid(mig)
            if ours and pod_labels.get(APP_LABEL) == LAUNCHER_VALUE:
                return pod
        return None

    def _is_handed_off(self, mig_key: str, mig: RawObject, vmi: RawObject | None) -> bool:
        state = migration_state(vmi)
        return (bool(state) and state.get("migrationUid") == uid(mig)) or (
            mig_key in self.handed_off
        )

    def _can_migrate(self, mig: RawObject, vmi: RawObject) -> bool:
        """No other unfinished migration holds the VMI (upstream's canMigrateVMI)."""
        holder = migration_state(vmi).get("migrationUid")
        if not holder or holder == uid(mig):
            return True
        namespace = meta(mig).get("namespace")
        for other in self.migrations.store.objects():
            if uid(other) == holder and meta(other).get("namespace") == namespace:
                return phase(other) in FINAL_MIGRATION_PHASES
        return True

    async def _sync(
        self, mig_key: str, mig: RawObject, vmi: RawObject, target: RawObject | None
    ) -> None:
        """The actions of the current phase (upstream's sync)."""
        state = migration_state(vmi)
        ours = bool(state) and state.get("migrationUid") == uid(mig)
        if deleting(vmi) or (ours and state.get("completed") is True):
            return
        if not self._can_migrate(mig, vmi):
            return
        current = phase(mig)
        if current == Phase.PENDING:
            if deleting(mig):
                await self._delete_target(mig_key, mig, target, "migration canceled")
            elif target is None:
                if not await self._backing_off(mig_key, mig, vmi):
                    await self._create_target(mig_key, mig, vmi)
            elif not pod_ready(target):
                await self._check_pending_timeout(mig_key, mig, vmi, target)
        elif current == Phase.SCHEDULING:
            if deleting(mig):
                await self._delete_target(mig_key, mig, target, "migration canceled")
            elif target is not None:
                await self._check_pending_timeout(mig_key, mig, vmi, target)
        elif current == Phase.SCHEDULED:
            if deleting(mig) and not self._is_handed_off(mig_key, mig, vmi):
                await self._delete_target(mig_key, mig, target, "migration canceled")
            elif target is not None and pod_ready(target):
                await self._hand_off(mig_key, mig, vmi, target)
        elif current in (Phase.PREPARING_TARGET, Phase.TARGET_READY):
            gone = target is None or pod_down(target)
            ended = state.get("failed") is True or state.get("completed") is True
            if gone and ours and not state.get("startTimestamp") and not ended:
                await self._mark_failed_on_vmi(mig, vmi)
        elif current == Phase.RUNNING:
            if deleting(mig) and ours and state.get("abortRequested") is not True:
                await self._request_abort(mig, vmi)
        elif current == Phase.FAILED:
            if ours and state.get("failed") is not True:
                await self._mark_failed_on_vmi(mig, vmi)
            node = mapping(vmi.get("status")).get("nodeName")
            if (
                target is not None
                and not deleting(target)
                and phase(target) not in FINAL_POD_PHASES
                and mapping(target.get("spec")).get("nodeName") != node
            ):
                # The guest stays on the source; the target pod has nothing left to do.
                await self._delete_target(mig_key, mig, target, "migration failed")

    async def _backing_off(self, mig_key: str, mig: RawObject, vmi: RawObject) -> bool:
        """An evacuation retrying after failures waits 20 s, doubled per failure since the
        last success, from the previous failure (upstream's handleMigrationBackoff)."""
        if EVACUATION_MIGRATION_ANNOTATION not in mapping(meta(mig).get("annotations")):
            return False
        vmi_key = _vmi_key(mig)
        earlier = sorted(
            (
                m
                for m in self.migrations.store.objects()
                if _vmi_key(m) == vmi_key
                and EVACUATION_MIGRATION_ANNOTATION in mapping(meta(m).get("annotations"))
            ),
            key=lambda m: str(meta(m).get("creationTimestamp") or ""),
            reverse=True,
        )
        if len(earlier) < 2 or uid(earlier[0]) != uid(mig):
            return False
        backoff = 0.0
        for other in earlier[1:]:
            if phase(other) == Phase.SUCCEEDED:
                break
            if phase(other) == Phase.FAILED and not deleting(other):
                backoff = backoff * 2 if backoff else 20.0
        if not backoff:
            return False
        failed_at = next(
            (
                parse_time(mapping(s).get("phaseTransitionTimestamp"))
                for s in mapping(earlier[1].get("status")).get("phaseTransitionTimestamps") or ()
                if mapping(s).get("phase") == Phase.FAILED
            ),
            None,
        )
        if failed_at is None:
            return False
        remaining = (failed_at + dt.timedelta(seconds=backoff) - self.now()).total_seconds()
        if remaining <= 0:
            return False
        self.queue.add_after(mig_key, remaining)
        vmi_name = f"{meta(vmi).get('namespace')}/{meta(vmi).get('name')}"
        await self._event(vmi, "Warning", "MigrationBackoff", f"backoff migrating vmi {vmi_name}")
        return True

    # -- the target pod ---------------------------------------------------------------------

    def _running_migrations(self) -> list[RawObject]:
        """Unfinished migrations past Pending, or Pending with a target pod already."""
        running = []
        for mig in self.migrations.store.objects():
            current = phase(mig)
            if current in FINAL_MIGRATION_PHASES:
                continue
            if running_phase(current):
                running.append(mig)
                continue
            vmi = self.vmis.get_raw(_vmi_key(mig))
            if vmi is not None and self._target_pod(mig, vmi) is not None:
                running.append(mig)
        return running

    def _outbound_from(self, node: str, running: list[RawObject]) -> int:
        count = 0
        for mig in running:
            vmi = self.vmis.get_raw(_vmi_key(mig))
            if vmi is None:
                continue
            on_node = mapping(vmi.get("status")).get("nodeName") == node
            if on_node or migration_state(vmi).get("sourceNode") == node:
                count += 1
        return count

    async def _create_target(self, mig_key: str, mig: RawObject, vmi: RawObject) -> None:
        pods = self.pods.store.by_index(OWNER_INDEX, uid(vmi))
        source_pod = current_pod(vmi, pods)
        if source_pod is None:
            return  # the source pod went away; the VMI's end will fail the migration
        if sum(1 for p in pods if phase(p) not in FINAL_POD_PHASES) > 1:
            # Pods of an earlier migration are still winding down.
            self.queue.add_after(mig_key, 1.0)
            return
        limits = self.config().cluster.migrations
        running = self._running_migrations()
        if len(running) >= (limits.parallel_migrations_per_cluster or 0):
            log.info("migration waits: the cluster's parallel migration limit", migration=mig_key)
            self.queue.add_after(mig_key, CAPACITY_RETRY)
            return
        source = str(mapping(vmi.get("status")).get("nodeName") or "")
        if self._outbound_from(source, running) >= (
            limits.parallel_outbound_migrations_per_node or 0
        ):
            log.info("migration waits: outbound migrations per node limit", migration=mig_key)
            self.queue.add_after(mig_key, CAPACITY_RETRY)
            return
        if phase(vmi) != VmiPhase.RUNNING:
            return
        try:
            typed = load(VirtualMachineInstance, thaw(vmi))
            pod = render_launcher_pod(
                typed,
                self.config(),
                extra_labels={MIGRATION_JOB_LABEL: uid(mig)},
                block_volumes=block_volumes_in_status(vmi),
                # The source's way, whatever the gate says now: the domain names its files.
                image_volumes=uses_image_volumes(source_pod),
            )
        except (InvalidObjectError, RenderError) as exc:
            await self._event(vmi, "Warning", "FailedCreate", f"Error creating pod: {exc}")
            return
        with_source_anti_affinity(pod, uid(vmi))
        added = mapping(mapping(mig.get("spec")).get("addedNodeSelector"))
        if added:
            selector = pod["spec"].setdefault("nodeSelector", {})
            for label, value in added.items():
                selector.setdefault(str(label), str(value))
        self.expectations.expect_creations(mig_key, 1)
        try:
            created = await self.client.create(PODS, pod)
        except ApiError as exc:
            self.expectations.creation_observed(mig_key)
            await self._event(vmi, "Warning", "FailedCreate", f"Error creating pod: {exc}")
            raise
        name = mapping(created.get("metadata")).get("name") if created else None
        log.info("created migration target pod", migration=mig_key, pod=name)
        await self._event(mig, "Normal", "SuccessfulCreate", f"Created migration target pod {name}")

    async def _delete_target(
        self, mig_key: str, mig: RawObject, target: RawObject | None, why: str
    ) -> None:
        if target is None or deleting(target):
            return
        m = meta(target)
        self.expectations.expect_deletions(mig_key, [uid(target)])
        try:
            await self.client.delete(PODS, str(m["name"]), str(m["namespace"]), uid=uid(target))
        except ApiError as exc:
            self.expectations.deletion_observed(mig_key, uid(target))
            if exc.not_found:
                return
            await self._event(
                mig, "Warning", "FailedDelete", f"Error deleting migration target pod: {exc}"
            )
            raise
        message = f"{why} and pod {m['namespace']}/{m['name']} is deleted"
        if why.endswith("exceeded"):
            message = why
        log.info("deleted migration target pod", migration=mig_key, reason=message)
        await self._event(mig, "Normal", "SuccessfulDelete", message)

    async def _check_pending_timeout(
        self, mig_key: str, mig: RawObject, vmi: RawObject, pod: RawObject
    ) -> None:
        """Delete a target pod Pending for too long; else look again when it would be."""
        created = parse_time(meta(pod).get("creationTimestamp"))
        if phase(pod) != "Pending" or deleting(pod) or created is None:
            return
        waited = max(0.0, (self.now() - created).total_seconds())
        m = meta(pod)
        name = f"{m.get('namespace')}/{m.get('name')}"
        if _unschedulable(pod):
            vmi_name = f"{meta(vmi).get('namespace')}/{meta(vmi).get('name')}"
            await self._event(
                mig,
                "Warning",
                "migrationTargetPodUnschedulable",
                f"Migration target pod for VMI [{vmi_name}] is currently unschedulable.",
            )
            limit = _timeout(mig, UNSCHEDULABLE_TIMEOUT_ANNOTATION, UNSCHEDULABLE_PENDING_TIMEOUT)
            if waited >= limit:
                why = f"unschedulable pod {name} timeout period exceeded"
                await self._delete_target(mig_key, mig, pod, why)
                return
            self.queue.add_after(mig_key, limit - waited)
        limit = _timeout(mig, PENDING_TIMEOUT_ANNOTATION, CATCH_ALL_PENDING_TIMEOUT)
        if waited >= limit:
            await self._delete_target(
                mig_key, mig, pod, f"pending pod {name} timeout period exceeded"
            )
            return
        self.queue.add_after(mig_key, limit - waited)

    # -- hand-off and abort -----------------------------------------------------------------

    async def _namespace_labels(self, namespace: str) -> Mapping[str, str] | None:
        try:
            ns = await self.client.get(NAMESPACES, namespace)
        except ApiError as exc:
            if exc.not_found:
                return None
            raise
        return mapping(mapping(mapping(ns).get("metadata")).get("labels")) or None

    def _policies(self) -> list[MigrationPolicy]:
        loaded = []
        for raw in self.policies.store.objects() if self.policies is not None else ():
            try:
                loaded.append(load(MigrationPolicy, thaw(raw)))
            except InvalidObjectError:
                continue  # a policy without selectors never matches
        return loaded

    async def _hand_off(self, mig_key: str, mig: RawObject, vmi: RawObject, pod: RawObject) -> None:
        """Tell the handlers: the VMI's migrationState names this migration and its target."""
        state = migration_state(vmi)
        if state and state.get("migrationUid") == uid(mig):
            return
        node = str(mapping(pod.get("spec")).get("nodeName") or "")
        vmi_labels = meta(vmi).get("labels")
        policy = match_policy(
            self._policies(),
            mapping(vmi_labels) if vmi_labels is not None else None,
            await self._namespace_labels(str(meta(vmi).get("namespace"))),
        )
        options = resolve_options(self.config().cluster.migrations, policy.spec if policy else None)
        new_state: dict[str, Any] = {
            "migrationUid": uid(mig),
            "targetNode": node,
            "sourceNode": mapping(vmi.get("status")).get("nodeName"),
            "targetPod": meta(pod).get("name"),
            "migrationConfiguration": dump(options),
        }
        source_pod = mapping(mapping(mig.get("status")).get("migrationState")).get("sourcePod")
        if source_pod:
            new_state["sourcePod"] = source_pod
        if policy is not None and policy.metadata is not None and policy.metadata.name:
            new_state["migrationPolicyName"] = policy.metadata.name
        ops: list[Any] = []
        if state:
            ops.append({"op": "test", "path": "/status/migrationState", "value": thaw(state)})
            ops.append({"op": "replace", "path": "/status/migrationState", "value": new_state})
        else:
            ops.append({"op": "add", "path": "/status/migrationState", "value": new_state})
        if meta(vmi).get("labels") is None:
            ops.append({"op": "add", "path": "/metadata/labels", "value": {}})
        ops.append(
            {
                "op": "add",
                "path": pointer("metadata", "labels", MIGRATION_TARGET_NODE_LABEL),
                "value": node,
            }
        )
        await self._tell_handlers(
            mig,
            vmi,
            ops,
            ("FailedHandOver", "Failed to set MigrationStat in VMI status. :"),
            (
                "SuccessfulHandOver",
                "Migration target pod is ready for preparation by virt-handler.",
            ),
        )
        self.handed_off.add(mig_key)
        log.info("handed off migration to virt-handler", migration=mig_key, target=node)

    async def _request_abort(self, mig: RawObject, vmi: RawObject) -> None:
        ops = [
            {"op": "test", "path": "/status/migrationState/migrationUid", "value": uid(mig)},
            {"op": "add", "path": "/status/migrationState/abortRequested", "value": True},
        ]
        await self._tell_handlers(
            mig,
            vmi,
            ops,
            ("FailedAbortMigration", "failed to set MigrationState in VMI status. :"),
            ("SuccessfulAbortMigration", "Migration is ready to be canceled by virt-handler."),
        )
        log.info("signalled migration abort", migration=meta(mig).get("name"))

    async def _tell_handlers(
        self,
        mig: RawObject,
        vmi: RawObject,
        ops: list[Any],
        failed: tuple[str, str],
        done: tuple[str, str],
    ) -> None:
        """Patch the VMI for the handlers; an Event on the migration either way."""
        try:
            await self._patch_vmi(vmi, ops)
        except ApiError as exc:
            await self._event(mig, "Warning", failed[0], f"{failed[1]}{exc.message}")
            raise
        await self._event(mig, "Normal", *done)

    async def _mark_failed_on_vmi(self, mig: RawObject, vmi: RawObject) -> None:
        """The target pod went away before the migration started: the VMI's state says so."""
        state = migration_state(vmi)
        stamp = format_time(self.now())
        base = "/status/migrationState"
        ops: list[Any] = [
            {"op": "test", "path": f"{base}/migrationUid", "value": uid(mig)},
            {"op": "add", "path": f"{base}/failed", "value": True},
            {"op": "add", "path": f"{base}/completed", "value": True},
        ]
        if not state.get("endTimestamp"):
            ops.append({"op": "add", "path": f"{base}/endTimestamp", "value": stamp})
        if not state.get("startTimestamp"):
            ops.append({"op": "add", "path": f"{base}/startTimestamp", "value": stamp})
        if not state.get("failureReason"):
            ops.append(
                {"op": "add", "path": f"{base}/failureReason", "value": "Target pod is down"}
            )
        await self._patch_vmi(vmi, ops)
        await self._event(
            vmi,
            "Warning",
            "FailedMigration",
            f"VirtualMachineInstance migration uid {uid(mig)} failed. reason: Target pod is down",
        )

    async def _patch_vmi(self, vmi: RawObject, ops: list[Any]) -> None:
        m = meta(vmi)
        ops = [{"op": "test", "path": "/metadata/uid", "value": uid(vmi)}, *ops]
        await self.client.json_patch(
            VIRTUAL_MACHINE_INSTANCES, str(m["name"]), ops, str(m["namespace"])
        )

    # -- status -----------------------------------------------------------------------------

    async def _update_status(
        self, mig_key: str, mig: RawObject, vmi: RawObject | None, target: RawObject | None
    ) -> str:
        """Write the next phase (and what goes with it); the phase now in effect."""
        status = mapping(mig.get("status"))
        old_phase = str(status.get("phase") or "")
        decision = decide(
            mig,
            vmi,
            target,
            handed_off=self._is_handed_off(mig_key, mig, vmi),
            can_migrate=vmi is None or self._can_migrate(mig, vmi),
        )
        now = self.now()
        patch: dict[str, Any] = {}
        if decision.phase != old_phase:
            patch["phase"] = decision.phase
            stamps = [thaw(s) for s in status.get("phaseTransitionTimestamps") or ()]
            if not any(mapping(s).get("phase") == decision.phase for s in stamps):
                stamps.append(
                    {"phase": decision.phase, "phaseTransitionTimestamp": format_time(now)}
                )
                patch["phaseTransitionTimestamps"] = stamps
        conditions = list(status.get("conditions") or ())
        if decision.abort_requested and condition(mig, ABORT_REQUESTED) is None:
            patch["conditions"] = upsert_condition(conditions, ABORT_REQUESTED, "True", now)
        state = thaw(status.get("migrationState") or {})
        new_state = dict(state)
        if decision.phase == Phase.PENDING and vmi is not None:
            source = current_pod(vmi, self.pods.store.by_index(OWNER_INDEX, uid(vmi)))
            if source is not None:
                new_state["sourcePod"] = meta(source).get("name")
        vmi_state = migration_state(vmi)
        if old_phase in FINAL_MIGRATION_PHASES and vmi_state.get("migrationUid") == uid(mig):
            new_state = thaw(vmi_state)  # the final word of the handlers, kept with the job
        if new_state != state:
            patch["migrationState"] = new_state
        if patch:
            m = meta(mig)
            try:
                await self.client.patch_status(
                    VIRTUAL_MACHINE_INSTANCE_MIGRATIONS,
                    str(m["name"]),
                    patch,
                    str(m["namespace"]),
                    resource_version=str(m.get("resourceVersion") or "") or None,
                )
            except ApiError as exc:
                if not exc.not_found:
                    raise
                return decision.phase
            if decision.event is not None and decision.phase != old_phase:
                await self._event(mig, *decision.event)
        if old_phase in FINAL_MIGRATION_PHASES:
            await self._drop_finalizer(mig)
        return decision.phase

    async def _drop_finalizer(self, mig: RawObject) -> None:
        finalizers = list(meta(mig).get("finalizers") or ())
        if MIGRATION_FINALIZER not in finalizers:
            return
        kept = [f for f in finalizers if f != MIGRATION_FINALIZER]
        m = meta(mig)
        try:
            await self.client.json_patch(
                VIRTUAL_MACHINE_INSTANCE_MIGRATIONS,
                str(m["name"]),
                [
                    {"op": "test", "path": "/metadata/finalizers", "value": finalizers},
                    {"op": "replace", "path": "/metadata/finalizers", "value": kept},
                ],
                str(m["namespace"]),
            )
        except ApiError as exc:
            if not exc.not_found:
                raise

    # -- housekeeping -----------------------------------------------------------------------

    async def _collect_garbage(self, vmi: RawObject) -> None:
        """Keep the newest final migrations of a VMI; delete the rest and their dead pods."""
        m = meta(vmi)
        final = sorted(
            (
                mig
                for mig in self.migrations.store.objects()
                if meta(mig).get("namespace") == m.get("namespace")
                and mapping(mig.get("spec")).get("vmiName") == m.get("name")
                and phase(mig) in FINAL_MIGRATION_PHASES
                and not deleting(mig)
            ),
            key=lambda mig: str(meta(mig).get("creationTimestamp") or ""),
        )
        for mig in final[: max(0, len(final) - FINALIZED_MIGRATIONS_KEPT)]:
            state = mapping(mapping(mig.get("status")).get("migrationState"))
            defunct = ""
            if state.get("failed") is True:
                defunct = str(state.get("targetPod") or "")
            elif state.get("completed") is True:
                defunct = str(state.get("sourcePod") or "")
            if defunct:
                try:
                    await self.client.delete(PODS, defunct, str(m.get("namespace")))
                except ApiError as exc:
                    if not exc.not_found:
                        raise
            await self._delete(VIRTUAL_MACHINE_INSTANCE_MIGRATIONS, mig)

    def _requeue_pending(self) -> None:
        """A slot freed: look at the pending migrations again (up to the cluster limit)."""
        limit = self.config().cluster.migrations.parallel_migrations_per_cluster or 0
        pending = [m for m in self.migrations.store.objects() if phase(m) == Phase.PENDING]
        for mig in pending[:limit]:
            self.queue.add(f"{meta(mig).get('namespace')}/{meta(mig).get('name')}")

    async def _delete(self, resource: Resource, obj: RawObject) -> None:
        m = meta(obj)
        try:
            await self.client.delete(resource, str(m["name"]), str(m["namespace"]), uid=uid(obj))
        except ApiError as exc:
            if not (exc.not_found or exc.conflict):
                raise

    async def _event(self, obj: RawObject, type_: EventType, reason: str, message: str) -> None:
        if self.recorder is not None:
            await self.recorder.event(obj, type_, reason, message)
