"""Conditions derived the same way by every writer: upstream's reasons and rules.

The VMI's Ready condition mirrors its launcher pod's (virt-controller writes it with the
phases it owns, virt-handler with the phases it owns, so neither adds a write for it);
the VM's Ready condition copies the VMI's; an image the kubelet cannot pull shows as the
VMI's Synchronized=False with the kubelet's reason. Pure functions over raw objects.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from .enums import FINAL_POD_PHASES
from .values import as_map

__all__ = [
    "ERR_IMAGE_PULL",
    "GUEST_NOT_RUNNING",
    "IMAGE_PULL_BACK_OFF",
    "IMAGE_PULL_REASONS",
    "POD_CONDITION_MISSING",
    "POD_NOT_EXISTS",
    "POD_TERMINATING",
    "VMI_CONDITION_MISSING",
    "VMI_NOT_EXISTS",
    "find_condition",
    "image_pull_error",
    "pod_down_or_going_down",
    "same_condition",
    "vm_ready_condition",
    "vmi_ready_condition",
]

#: The VMI's Ready=False reasons (upstream's core/v1 constants).
POD_NOT_EXISTS: Final = "PodNotExists"
POD_TERMINATING: Final = "PodTerminating"
GUEST_NOT_RUNNING: Final = "GuestNotRunning"
POD_CONDITION_MISSING: Final = "PodConditionMissing"
#: The VM's Ready=False reasons when there is nothing to copy.
VMI_NOT_EXISTS: Final = "VMINotExists"
VMI_CONDITION_MISSING: Final = "VMIConditionMissing"
#: The kubelet's waiting reasons for an image it cannot pull.
ERR_IMAGE_PULL: Final = "ErrImagePull"
IMAGE_PULL_BACK_OFF: Final = "ImagePullBackOff"
IMAGE_PULL_REASONS: Final = frozenset({ERR_IMAGE_PULL, IMAGE_PULL_BACK_OFF})


def _items(value: object) -> tuple[Mapping[str, Any], ...]:
    # Informers hand out frozen objects (tuples), the API plain JSON (lists).
    if isinstance(value, list | tuple):
        return tuple(as_map(v) for v in value)
    return ()


def find_condition(obj: Mapping[str, Any] | None, kind: str) -> Mapping[str, Any] | None:
    """The status condition of type `kind` of a raw object, if present."""
    if obj is None:
        return None
    for condition in _items(as_map(obj.get("status")).get("conditions")):
        if condition.get("type") == kind:
            return condition
    return None


def same_condition(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> bool:
    """Same status, reason and message (times aside: rewriting them would be a write)."""
    if a is None or b is None:
        return a is b
    return all((a.get(k) or "") == (b.get(k) or "") for k in ("status", "reason", "message"))


def _condition(
    kind: str,
    status: str,
    reason: str,
    message: str,
    transition: object,
    probe: object = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {"type": kind, "status": status}
    if reason:
        out["reason"] = reason
    if message:
        out["message"] = message
    out["lastProbeTime"] = probe
    out["lastTransitionTime"] = transition or None
    return out


def _copy(kind: str, source: Mapping[str, Any], now: str) -> dict[str, Any]:
    return _condition(
        kind,
        str(source.get("status") or "Unknown"),
        str(source.get("reason") or ""),
        str(source.get("message") or ""),
        source.get("lastTransitionTime") or now,
        source.get("lastProbeTime"),
    )


def pod_down_or_going_down(pod: Mapping[str, Any]) -> bool:
    """Upstream's IsPodDownOrGoingDown: final, compute container ended, or being deleted."""
    status = as_map(pod.get("status"))
    if status.get("phase") in FINAL_POD_PHASES or as_map(pod.get("metadata")).get(
        "deletionTimestamp"
    ):
        return True
    for container in _items(status.get("containerStatuses")):
        if container.get("name") == "compute" and as_map(container.get("state")).get("terminated"):
            return True
    return False


def vmi_ready_condition(running: bool, pod: Mapping[str, Any] | None, now: str) -> dict[str, Any]:
    """The VMI's Ready condition (upstream's syncReadyConditionFromPod): False while there
    is no pod, it goes down or the guest does not run; then the pod's own Ready."""
    if pod is None:
        return _condition(
            "Ready", "False", POD_NOT_EXISTS, "virt-launcher pod has not yet been scheduled", now
        )
    if pod_down_or_going_down(pod):
        return _condition(
            "Ready", "False", POD_TERMINATING, "virt-launcher pod is terminating", now
        )
    if not running:
        return _condition(
            "Ready", "False", GUEST_NOT_RUNNING, "Guest VM is not reported as running", now
        )
    ready = find_condition(pod, "Ready")
    if ready is None:
        return _condition(
            "Ready",
            "False",
            POD_CONDITION_MISSING,
            "virt-launcher pod is missing the Ready condition",
            now,
        )
    return _copy("Ready", ready, now)


def vm_ready_condition(vmi: Mapping[str, Any] | None, now: str) -> dict[str, Any]:
    """The VM's Ready condition (upstream's syncReadyConditionFromVMI): the VMI's, copied."""
    if vmi is None:
        return _condition("Ready", "False", VMI_NOT_EXISTS, "VMI does not exist", now)
    ready = find_condition(vmi, "Ready")
    if ready is None:
        return _condition(
            "Ready", "False", VMI_CONDITION_MISSING, "VMI is missing the Ready condition", now
        )
    return _copy("Ready", ready, now)


def image_pull_error(pod: Mapping[str, Any] | None) -> tuple[str, str] | None:
    """(reason, message) of the first container (init containers first) whose image the
    kubelet cannot pull, as upstream's checkForContainerImageError; None when none."""
    if pod is None:
        return None
    status = as_map(pod.get("status"))
    for key in ("initContainerStatuses", "containerStatuses"):
        for container in _items(status.get(key)):
            waiting = as_map(as_map(container.get("state")).get("waiting"))
            reason = waiting.get("reason")
            if reason in IMAGE_PULL_REASONS:
                return str(reason), str(waiting.get("message") or "")
    return None
