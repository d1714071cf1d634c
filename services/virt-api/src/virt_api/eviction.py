"""The pod-eviction webhook (upstream's virt-launcher-eviction-interceptor): an eviction of
a launcher pod whose VMI should live-migrate is refused (429, so `kubectl drain` retries)
and instead marks the VMI with status.evacuationNodeName; virt-controller's evacuation
controller then creates a migration, and once the VMI has left the node the eviction of
the emptied pod succeeds.

Evictions of other pods, of finished launcher pods and of VMIs without an eviction
strategy pass. A dry-run eviction marks the VMI with a dry-run patch (sideEffects
NoneOnDryRun).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kube_runtime import PODS, VIRTUAL_MACHINE_INSTANCES, ApiError, pointer
from kubevirt_api.admission import Cause
from kubevirt_api.enums import FINAL_POD_PHASES, EvictionStrategy
from kubevirt_api.migrations import EVICTION_SOURCE_ANNOTATION, eviction_strategy, live_migratable

from .review import Review, allow, deny

if TYPE_CHECKING:
    from .webhooks import AdmissionContext

__all__ = ["EVICTION_REFUSED_CODE", "admit_pod_eviction"]

#: Upstream answers every refusal with 429 Too Many Requests: the caller retries.
EVICTION_REFUSED_CODE = 429
_DOMAIN_ANNOTATION = "kubevirt.io/domain"
# The descheduler names itself on its eviction requests; upstream records it on the VMI.
_REQUESTED_BY = "requested-by"
_DESCHEDULER = "sigs.k8s.io/descheduler"


def _refuse(uid: str, message: str) -> dict[str, Any]:
    return deny(uid, [Cause("", message)], code=EVICTION_REFUSED_CODE, reason="TooManyRequests")


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _dry_run(review: Review) -> bool:
    options = _map(review.object.get("deleteOptions"))
    dry_run = options.get("dryRun")
    return review.dry_run or (isinstance(dry_run, list) and dry_run[:1] == ["All"])


async def admit_pod_eviction(review: Review, ctx: AdmissionContext) -> dict[str, Any]:
    """Answer one pods/eviction review."""
    if ctx.api is None:
        return allow(review.uid)
    try:
        pod = _map(await ctx.api.get(PODS, review.name, review.namespace))
    except ApiError:
        return allow(review.uid)  # as upstream: a pod it cannot read is not its business
    pod_meta = _map(pod.get("metadata"))
    launcher = _map(pod_meta.get("labels")).get("kubevirt.io") == "virt-launcher"
    if not launcher or _map(pod.get("status")).get("phase") in FINAL_POD_PHASES:
        return allow(review.uid)
    vmi_name = _map(pod_meta.get("annotations")).get(_DOMAIN_ANNOTATION)
    if not isinstance(vmi_name, str) or not vmi_name:
        return allow(review.uid)
    try:
        vmi = _map(await ctx.api.get(VIRTUAL_MACHINE_INSTANCES, vmi_name, review.namespace))
    except ApiError as error:
        return _refuse(review.uid, f"kubevirt failed getting the vmi: {error}")
    strategy = eviction_strategy(vmi, await ctx.cluster_config())
    condition = live_migratable(vmi)
    migratable = condition is not None and condition.get("status") == "True"
    if strategy == EvictionStrategy.LIVE_MIGRATE:
        if not migratable:
            return _refuse(
                review.uid,
                f"VMI {vmi_name} is configured with an eviction strategy but is not "
                "live-migratable",
            )
        mark = True
    elif strategy == EvictionStrategy.LIVE_MIGRATE_IF_POSSIBLE:
        mark = migratable
    else:
        mark = strategy == EvictionStrategy.EXTERNAL
    if not mark:
        return allow(review.uid)
    status = _map(vmi.get("status"))
    triggered = f'Eviction triggered evacuation of VMI "{review.namespace}/{vmi_name}"'
    if status.get("evacuationNodeName"):
        return _refuse(review.uid, f"Evacuation in progress: {triggered}")
    node = _map(pod.get("spec")).get("nodeName")
    if status.get("nodeName") != node:
        return _refuse(review.uid, "Eviction request for target Pod")
    ops: list[Any] = [{"op": "add", "path": "/status/evacuationNodeName", "value": node}]
    eviction_annotations = _map(_map(review.object.get("metadata")).get("annotations"))
    if eviction_annotations.get(_REQUESTED_BY) == _DESCHEDULER:
        if _map(vmi.get("metadata")).get("annotations"):
            path = pointer("metadata", "annotations", EVICTION_SOURCE_ANNOTATION)
            ops.append({"op": "add", "path": path, "value": "descheduler"})
        else:
            value = {EVICTION_SOURCE_ANNOTATION: "descheduler"}
            ops.append({"op": "add", "path": "/metadata/annotations", "value": value})
    try:
        await ctx.api.json_patch(
            VIRTUAL_MACHINE_INSTANCES, vmi_name, ops, review.namespace, dry_run=_dry_run(review)
        )
    except ApiError as error:
        return _refuse(review.uid, f"kubevirt failed marking the vmi for eviction: {error}")
    return _refuse(review.uid, triggered)
