"""The node controller: VMIs on a node whose virt-handler stopped its heartbeat fail.

virt-handler refreshes the node's `kubevirt.io/heartbeat` annotation; past the timeout the
node is marked unschedulable for VMIs and its unfinished VMIs become Failed with reason
NodeUnresponsive. A node that never had a heartbeat (no virt-handler yet) is left alone.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

import structlog
from kube_runtime import (
    NODES,
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

from .objects import format_time, labels, mapping, meta, phase, uid
from .wellknown import HEARTBEAT_ANNOTATION, NODE_SCHEDULABLE_LABEL

__all__ = ["NODE_INDEX", "NodeController", "heartbeat_age"]

log = structlog.get_logger(__name__)

NODE_INDEX = "node-name"


def heartbeat_age(node: RawObject, now: dt.datetime) -> float | None:
    """Seconds since the node's heartbeat annotation, or None without a readable one."""
    value = mapping(meta(node).get("annotations")).get(HEARTBEAT_ANNOTATION)
    if not isinstance(value, str):
        return None
    try:
        beat = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if beat.tzinfo is None:
        beat = beat.replace(tzinfo=dt.UTC)
    return (now - beat).total_seconds()


class NodeController:
    """Reconciles nodes by name; rechecks each node when its heartbeat would expire."""

    def __init__(
        self,
        client: KubeClient,
        nodes: SharedInformer[RawObject],
        vmis: SharedInformer[RawObject],
        queue: WorkQueue[str],
        *,
        timeout: float = 300.0,
        now: Callable[[], dt.datetime] | None = None,
    ) -> None:
        self.client = client
        self.nodes = nodes
        self.vmis = vmis
        self.queue = queue
        self.timeout = timeout
        self.now = now or (lambda: dt.datetime.now(dt.UTC))

    def on_node(self, event: Event[RawObject]) -> None:
        self.queue.add(event.key)

    def on_vmi(self, event: Event[RawObject]) -> None:
        node = mapping(event.raw.get("status")).get("nodeName")
        if isinstance(node, str) and node:
            self.queue.add(node)

    async def reconcile(self, name: str) -> None:
        node = self.nodes.get_raw(name)
        if node is None:
            return
        now = self.now()
        age = heartbeat_age(node, now)
        if age is None:
            return
        if age < self.timeout:
            self.queue.add_after(name, self.timeout - age + 1.0)
            return
        if labels(node).get(NODE_SCHEDULABLE_LABEL) != "false":
            await self.client.merge_patch(
                NODES, name, {"metadata": {"labels": {NODE_SCHEDULABLE_LABEL: "false"}}}
            )
        for vmi in self.vmis.store.by_index(NODE_INDEX, name):
            if phase(vmi) in FINAL_VMI_PHASES:
                continue
            m = meta(vmi)
            stamps = [
                thaw(s) for s in mapping(vmi.get("status")).get("phaseTransitionTimestamps") or ()
            ]
            stamps.append({"phase": Phase.FAILED, "phaseTransitionTimestamp": format_time(now)})
            try:
                await self.client.json_patch(
                    VIRTUAL_MACHINE_INSTANCES,
                    str(m["name"]),
                    [
                        {"op": "test", "path": "/metadata/uid", "value": uid(vmi)},
                        {"op": "test", "path": "/status/phase", "value": phase(vmi)},
                        {"op": "replace", "path": "/status/phase", "value": Phase.FAILED},
                        {"op": "add", "path": "/status/reason", "value": "NodeUnresponsive"},
                        {"op": "add", "path": "/status/phaseTransitionTimestamps", "value": stamps},
                    ],
                    str(m["namespace"]),
                )
                log.info("vmi failed: node unresponsive", vmi=m.get("name"), node=name)
            except ApiError as exc:
                if not (exc.not_found or exc.status == 422):
                    raise
