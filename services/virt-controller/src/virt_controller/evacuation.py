"""The evacuation controller (upstream's): migrations for VMIs that must leave a node.

A VMI leaves its node when virt-api's eviction webhook marked it (status.evacuationNodeName
is still its node: an eviction, e.g. from `kubectl drain`, was refused so that it could
migrate), or, upstream's deprecated way, when the node carries the drain taint
(migrations.nodeDrainTaintKey, NoSchedule). For each such VMI that wants to migrate on
eviction (evictionStrategy LiveMigrate, or LiveMigrateIfPossible while migratable), is
LiveMigratable, runs, has one active pod and no unfinished migration, it creates a
VirtualMachineInstanceMigration annotated `kubevirt.io/evacuationMigration=<node>`.
Reconciled by node name. Every VMI event queues its node, so a pass looks only at the
VMIs marked for that node (an index), not at all of the node's VMIs, unless the node
carries the drain taint: at 1000 VMIs on a node, scanning them all at each event was a
fifth of the controller's CPU.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import structlog
from kube_runtime import (
    ApiError,
    Event,
    EventRecorder,
    KubeClient,
    RawObject,
    SharedInformer,
    WorkQueue,
)
from kube_runtime.events import EventType
from kubevirt_api.enums import FINAL_MIGRATION_PHASES, FINAL_POD_PHASES, FINAL_VMI_PHASES
from kubevirt_api.migrations import (
    EVACUATION_MIGRATION_ANNOTATION,
    EVICTION_SOURCE_ANNOTATION,
    live_migratable,
    migratable_on_eviction,
)
from kubevirt_api.resources import VIRTUAL_MACHINE_INSTANCE_MIGRATIONS

from .config import ControllerConfig
from .expectations import Expectations
from .migration_phase import migration_state
from .node import NODE_INDEX
from .objects import deleting, mapping, meta, phase, uid
from .vmi import OWNER_INDEX

__all__ = [
    "EVACUATION_INDEX",
    "EvacuationController",
    "index_by_evacuation_node",
    "new_evacuation_migration",
]

#: The VMI informer's index of status.evacuationNodeName.
EVACUATION_INDEX = "evacuation-node"


def index_by_evacuation_node(obj: RawObject) -> Iterable[str]:
    """An index function: the node the eviction webhook marked the VMI to leave, if any."""
    node = mapping(obj.get("status")).get("evacuationNodeName")
    return (node,) if isinstance(node, str) and node else ()


log = structlog.get_logger(__name__)


def new_evacuation_migration(vmi: Mapping[str, Any], node: str) -> dict[str, Any]:
    """The migration upstream creates to move `vmi` off `node`."""
    descheduled = mapping(meta(vmi).get("annotations")).get(EVICTION_SOURCE_ANNOTATION)
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstanceMigration",
        "metadata": {
            "generateName": "kubevirt-evacuation-",
            "namespace": meta(vmi).get("namespace"),
            "annotations": {EVACUATION_MIGRATION_ANNOTATION: node},
        },
        "spec": {
            "vmiName": meta(vmi).get("name"),
            "priority": "system-maintenance" if descheduled == "descheduler" else "system-critical",
        },
    }


def _tainted(node: RawObject, key: str | None) -> bool:
    taints = mapping(node.get("spec")).get("taints") or ()
    return bool(key) and any(
        mapping(t).get("key") == key and mapping(t).get("effect") == "NoSchedule" for t in taints
    )


def _evicted(vmi: RawObject) -> bool:
    """Marked by the eviction webhook, still on that node, not mid-migration."""
    status = mapping(vmi.get("status"))
    marked = status.get("evacuationNodeName")
    state = migration_state(vmi)
    migrating = bool(state.get("startTimestamp")) and not state.get("endTimestamp")
    return bool(marked) and marked == status.get("nodeName") and not migrating


class EvacuationController:
    """Creates the migrations that empty a node of its evicted VMIs."""

    def __init__(
        self,
        client: KubeClient,
        nodes: SharedInformer[RawObject],
        vmis: SharedInformer[RawObject],
        migrations: SharedInformer[RawObject],
        pods: SharedInformer[RawObject],
        queue: WorkQueue[str],
        config: Callable[[], ControllerConfig],
        *,
        recorder: EventRecorder | None = None,
    ) -> None:
        self.client = client
        self.nodes = nodes
        self.vmis = vmis
        self.migrations = migrations
        self.pods = pods
        self.queue = queue
        self.config = config
        self.recorder = recorder
        self.expectations = Expectations(queue.clock)

    def on_node(self, event: Event[RawObject]) -> None:
        self.queue.add(event.key)

    def on_vmi(self, event: Event[RawObject]) -> None:
        node = mapping(event.raw.get("status")).get("nodeName")
        if isinstance(node, str) and node:
            self.queue.add(node)

    def on_migration(self, event: Event[RawObject]) -> None:
        node = mapping(meta(event.raw).get("annotations")).get(EVACUATION_MIGRATION_ANNOTATION)
        if isinstance(node, str) and node:
            if event.type.value == "ADDED" and event.old_raw is None:
                self.expectations.creation_observed(node)
            self.queue.add(node)
            return
        vmi = self.vmis.get_raw(
            f"{meta(event.raw).get('namespace')}/{mapping(event.raw.get('spec')).get('vmiName')}"
        )
        if vmi is not None:
            self.on_vmi(Event(event.type, event.key, vmi, None, False, event.decode))

    async def reconcile(self, node_name: str) -> None:
        node = self.nodes.get_raw(node_name)
        if node is None:
            self.expectations.forget(node_name)
            return
        if not self.expectations.satisfied(node_name):
            return
        config = self.config().cluster
        if _tainted(node, config.migrations.node_drain_taint_key):
            leaving = self.vmis.store.by_index(NODE_INDEX, node_name)
        else:
            marked = self.vmis.store.by_index(EVACUATION_INDEX, node_name)
            leaving = [v for v in marked if _evicted(v)]
        if not leaving:
            return
        busy = {
            f"{meta(m).get('namespace')}/{mapping(m.get('spec')).get('vmiName')}"
            for m in self.migrations.store.objects()
            if phase(m) not in FINAL_MIGRATION_PHASES
        }
        candidates = []
        for vmi in leaving:
            if phase(vmi) in FINAL_VMI_PHASES or deleting(vmi):
                continue
            if not migratable_on_eviction(vmi, config):
                continue
            condition = live_migratable(vmi)
            if condition is None or condition.get("status") != "True":
                continue
            if f"{meta(vmi).get('namespace')}/{meta(vmi).get('name')}" in busy:
                continue
            pods = self.pods.store.by_index(OWNER_INDEX, uid(vmi))
            if sum(1 for p in pods if phase(p) not in FINAL_POD_PHASES) > 1:
                continue  # a previous migration's pods are still winding down
            candidates.append(vmi)
        if not candidates:
            return
        self.expectations.expect_creations(node_name, len(candidates))
        failure: ApiError | None = None
        for vmi in candidates:
            try:
                created = await self.client.create(
                    VIRTUAL_MACHINE_INSTANCE_MIGRATIONS, new_evacuation_migration(vmi, node_name)
                )
            except ApiError as exc:
                self.expectations.creation_observed(node_name)
                await self._event(
                    vmi, "Warning", "FailedCreate", f"Error creating a Migration: {exc}"
                )
                failure = exc
                continue
            name = mapping(mapping(created).get("metadata")).get("name")
            log.info("evacuating", vmi=meta(vmi).get("name"), node=node_name, migration=name)
            await self._event(vmi, "Normal", "SuccessfulCreate", f"Created Migration {name}")
        if failure is not None:
            raise failure

    async def _event(self, obj: RawObject, type_: EventType, reason: str, message: str) -> None:
        if self.recorder is not None:
            await self.recorder.event(obj, type_, reason, message)
