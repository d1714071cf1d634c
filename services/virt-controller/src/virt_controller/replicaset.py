"""The VMI replica set controller: keeps spec.replicas live VMIs matching the selector.

VMIs count when controlled by the set (ownerReference) and matching its selector; finished
ones are deleted and replaced. Status carries replicas, readyReplicas and the selector
string the scale subresource reads.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import structlog
from kube_runtime import (
    VIRTUAL_MACHINE_INSTANCES,
    ApiError,
    Event,
    KubeClient,
    RawObject,
    SharedInformer,
    WorkQueue,
    thaw,
)
from kubevirt_api.enums import FINAL_VMI_PHASES
from kubevirt_api.enums import VirtualMachineInstancePhase as Phase
from kubevirt_api.resources import VIRTUAL_MACHINE_INSTANCE_REPLICASETS
from kubevirt_api.selectors import SelectorError, matches, selector_string

from .bursts import in_bursts
from .expectations import Expectations
from .objects import (
    condition,
    controller_owner,
    deleting,
    labels,
    mapping,
    meta,
    owner_ref,
    phase,
    uid,
    upsert_condition,
)
from .vmi import OWNER_INDEX
from .writes import create_expected, delete_expected, patch_status_if_changed

__all__ = ["ReplicaSetController"]

log = structlog.get_logger(__name__)


class ReplicaSetController:
    """Reconciles VirtualMachineInstanceReplicaSets by key."""

    def __init__(
        self,
        client: KubeClient,
        sets: SharedInformer[RawObject],
        vmis: SharedInformer[RawObject],
        queue: WorkQueue[str],
        *,
        now: Callable[[], dt.datetime] | None = None,
    ) -> None:
        self.client = client
        self.sets = sets
        self.vmis = vmis
        self.queue = queue
        self.expectations = Expectations(queue.clock)
        self.now = now or (lambda: dt.datetime.now(dt.UTC))

    def on_set(self, event: Event[RawObject]) -> None:
        self.queue.add(event.key)

    def on_vmi(self, event: Event[RawObject]) -> None:
        ref = controller_owner(event.raw)
        if ref is None or ref.get("kind") != "VirtualMachineInstanceReplicaSet":
            return
        set_key = f"{meta(event.raw).get('namespace')}/{ref.get('name')}"
        if event.type.value == "ADDED" and event.old_raw is None:
            self.expectations.creation_observed(set_key)
        elif event.type.value == "DELETED":
            self.expectations.deletion_observed(set_key, uid(event.raw))
        self.queue.add(set_key)

    async def reconcile(self, set_key: str) -> None:
        rs = self.sets.get_raw(set_key)
        if rs is None:
            self.expectations.forget(set_key)
            return
        spec = mapping(rs.get("spec"))
        selector = mapping(spec.get("selector"))
        now = self.now()
        conditions = list(mapping(rs.get("status")).get("conditions") or ())
        try:
            owned = [
                v
                for v in self.vmis.store.by_index(OWNER_INDEX, uid(rs))
                if matches(selector, labels(v))
            ]
        except SelectorError as exc:
            conditions = upsert_condition(
                conditions,
                "ReplicaFailure",
                "True",
                now,
                reason="InvalidSelector",
                message=str(exc),
            )
            await self._patch_status(rs, 0, 0, conditions)
            return
        live = [v for v in owned if not deleting(v) and phase(v) not in FINAL_VMI_PHASES]
        finished = [v for v in owned if not deleting(v) and phase(v) in FINAL_VMI_PHASES]
        wanted = spec.get("replicas")
        replicas = wanted if isinstance(wanted, int) and wanted >= 0 else 1
        failure: str | None = None
        if not deleting(rs) and not spec.get("paused") and self.expectations.satisfied(set_key):
            try:
                if finished:
                    await self._delete(set_key, finished)
                diff = replicas - len(live)
                if diff > 0:
                    await self._create(set_key, rs, diff)
                elif diff < 0:
                    await self._delete(set_key, _deletion_order(live)[:-diff])
            except ApiError as exc:
                failure = str(exc)
        if failure is not None:
            conditions = upsert_condition(
                conditions, "ReplicaFailure", "True", now, reason="FailedCreate", message=failure
            )
        else:
            conditions = upsert_condition(conditions, "ReplicaFailure", None, now)
        ready = sum(
            1
            for v in live
            if (c := condition(v, "Ready")) is not None and c.get("status") == "True"
        )
        await self._patch_status(rs, len(live), ready, conditions)
        if failure is not None:
            raise RuntimeError(failure)

    async def _create(self, set_key: str, rs: RawObject, count: int) -> None:
        template = mapping(mapping(rs.get("spec")).get("template"))
        tmeta = mapping(template.get("metadata"))
        m = meta(rs)
        metadata: dict[str, Any] = {
            "generateName": f"{m.get('name')}",
            "namespace": m.get("namespace"),
            "labels": thaw(tmeta.get("labels") or {}),
            "ownerReferences": [
                owner_ref(rs, "kubevirt.io/v1", "VirtualMachineInstanceReplicaSet")
            ],
        }
        if tmeta.get("annotations"):
            metadata["annotations"] = thaw(tmeta["annotations"])
        body = {
            "apiVersion": "kubevirt.io/v1",
            "kind": "VirtualMachineInstance",
            "metadata": metadata,
            "spec": thaw(template.get("spec") or {}),
        }
        self.expectations.expect_creations(set_key, count)

        async def one(_: int) -> None:
            await create_expected(
                self.client, VIRTUAL_MACHINE_INSTANCES, body, self.expectations, set_key
            )

        errors = await in_bursts(range(count), one)
        log.info("scaled up", set=set_key, created=count - len(errors))
        if errors:
            raise errors[0]

    async def _delete(self, set_key: str, victims: list[RawObject]) -> None:
        self.expectations.expect_deletions(set_key, [uid(v) for v in victims])

        async def one(vmi: RawObject) -> None:
            await delete_expected(
                self.client, VIRTUAL_MACHINE_INSTANCES, vmi, self.expectations, set_key
            )

        errors = await in_bursts(victims, one)
        log.info("scaled down", set=set_key, deleted=len(victims))
        if errors:
            raise errors[0]

    async def _patch_status(
        self, rs: RawObject, replicas: int, ready: int, conditions: list[Any]
    ) -> None:
        selector = selector_string(mapping(mapping(rs.get("spec")).get("selector")))
        wanted: dict[str, Any] = {
            "replicas": replicas,
            "readyReplicas": ready,
            "labelSelector": selector,
            "conditions": conditions,
        }
        await patch_status_if_changed(self.client, VIRTUAL_MACHINE_INSTANCE_REPLICASETS, rs, wanted)


def _deletion_order(live: list[RawObject]) -> list[RawObject]:
    """Upstream's preference: not yet running first, then the newest."""
    rank: dict[str, int] = {
        Phase.UNSET: 0,
        Phase.PENDING: 0,
        Phase.SCHEDULING: 1,
        Phase.SCHEDULED: 2,
        Phase.RUNNING: 3,
    }
    return sorted(
        live,
        key=lambda v: (
            rank.get(phase(v), 0),
            _negated(str(meta(v).get("creationTimestamp") or "")),
        ),
    )


def _negated(text: str) -> tuple[int, ...]:
    return tuple(-ord(c) for c in text)
