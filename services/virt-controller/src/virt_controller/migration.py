"""The migration controller: a target launcher pod for each VMIM, up to phase Scheduled.

The target pod is the VMI's launcher pod again, labelled with the migration's uid and kept
off the source node by anti-affinity to the VMI's own pods. What follows Scheduled (the
handlers moving the guest) is virt-handler's part.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import structlog
from kube_runtime import (
    PODS,
    ApiError,
    Event,
    KubeClient,
    RawObject,
    SharedInformer,
    WorkQueue,
    thaw,
)
from kubevirt_api import InvalidObjectError, VirtualMachineInstance, load
from kubevirt_api.enums import FINAL_MIGRATION_PHASES, FINAL_VMI_PHASES, PodPhase
from kubevirt_api.enums import VirtualMachineInstanceMigrationPhase as MigrationPhase
from kubevirt_api.enums import VirtualMachineInstancePhase as VmiPhase
from kubevirt_api.resources import VIRTUAL_MACHINE_INSTANCE_MIGRATIONS

from .config import ControllerConfig
from .expectations import Expectations
from .launcher_pod import RenderError, render_launcher_pod
from .objects import controller_owner, deleting, format_time, labels, mapping, meta, phase, uid
from .vmi import OWNER_INDEX
from .wellknown import CREATED_BY_LABEL, MIGRATION_JOB_LABEL

__all__ = ["MigrationController", "with_source_anti_affinity"]

log = structlog.get_logger(__name__)


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
        now: Callable[[], dt.datetime] | None = None,
    ) -> None:
        self.client = client
        self.migrations = migrations
        self.vmis = vmis
        self.pods = pods
        self.queue = queue
        self.config = config
        self.expectations = Expectations(queue.clock)
        self.now = now or (lambda: dt.datetime.now(dt.UTC))

    def on_migration(self, event: Event[RawObject]) -> None:
        self.queue.add(event.key)

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
                self.queue.add(mig_key)

    async def reconcile(self, mig_key: str) -> None:
        mig = self.migrations.get_raw(mig_key)
        if mig is None:
            self.expectations.forget(mig_key)
            return
        status = mapping(mig.get("status"))
        current = str(status.get("phase") or "")
        if current in FINAL_MIGRATION_PHASES or deleting(mig):
            return
        namespace = str(meta(mig).get("namespace"))
        vmi_name = mapping(mig.get("spec")).get("vmiName")
        vmi = self.vmis.get_raw(f"{namespace}/{vmi_name}") if vmi_name else None
        if vmi is None or phase(vmi) in FINAL_VMI_PHASES:
            await self._patch(
                mig, MigrationPhase.FAILED, {}, reason="the VMI does not exist or has finished"
            )
            return
        if phase(vmi) != VmiPhase.RUNNING:
            await self._patch(mig, current or MigrationPhase.PENDING, {})
            return
        targets = [
            p
            for p in self.pods.store.by_index(OWNER_INDEX, uid(vmi))
            if labels(p).get(MIGRATION_JOB_LABEL) == uid(mig)
        ]
        source = str(mapping(vmi.get("status")).get("nodeName") or "")
        state: dict[str, Any] = {"sourceNode": source, "migrationUid": uid(mig)}
        if not targets:
            if self.expectations.satisfied(mig_key):
                await self._create_target(mig_key, mig, vmi)
            await self._patch(mig, current or MigrationPhase.PENDING, state)
            return
        pod = targets[0]
        state["targetPod"] = meta(pod).get("name")
        if phase(pod) == PodPhase.FAILED or deleting(pod):
            await self._patch(
                mig, MigrationPhase.FAILED, state, reason="target pod failed or was deleted"
            )
            return
        node = mapping(pod.get("spec")).get("nodeName")
        if node:
            state["targetNode"] = node
            await self._patch(mig, MigrationPhase.SCHEDULED, state)
        else:
            await self._patch(mig, MigrationPhase.SCHEDULING, state)

    async def _create_target(self, mig_key: str, mig: RawObject, vmi: RawObject) -> None:
        try:
            typed = load(VirtualMachineInstance, thaw(vmi))
            pod = render_launcher_pod(
                typed, self.config(), extra_labels={MIGRATION_JOB_LABEL: uid(mig)}
            )
        except (InvalidObjectError, RenderError) as exc:
            await self._patch(mig, MigrationPhase.FAILED, {}, reason=str(exc))
            return
        with_source_anti_affinity(pod, uid(vmi))
        self.expectations.expect_creations(mig_key, 1)
        try:
            await self.client.create(PODS, pod)
        except ApiError:
            self.expectations.creation_observed(mig_key)
            raise
        log.info("created migration target pod", migration=mig_key)

    async def _patch(
        self, mig: RawObject, new_phase: str, state: dict[str, Any], *, reason: str = ""
    ) -> None:
        status = mapping(mig.get("status"))
        patch: dict[str, Any] = {}
        if status.get("phase") != new_phase:
            patch["phase"] = new_phase
            stamps = [thaw(s) for s in status.get("phaseTransitionTimestamps") or ()]
            stamps.append({"phase": new_phase, "phaseTransitionTimestamp": format_time(self.now())})
            patch["phaseTransitionTimestamps"] = stamps
        current_state = thaw(status.get("migrationState") or {})
        merged = {**current_state, **state}
        if state and merged != current_state:
            patch["migrationState"] = merged
        if reason and new_phase == MigrationPhase.FAILED:
            patch["migrationState"] = {**merged, "failed": True, "failureReason": reason}
        if not patch:
            return
        m = meta(mig)
        try:
            await self.client.patch_status(
                VIRTUAL_MACHINE_INSTANCE_MIGRATIONS, str(m["name"]), patch, str(m["namespace"])
            )
        except ApiError as exc:
            if not exc.not_found:
                raise
