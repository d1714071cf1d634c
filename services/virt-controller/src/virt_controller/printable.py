"""The VM's status.printableStatus, as upstream derives it from the VM, VMI and pod."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from kubevirt_api import run_strategy
from kubevirt_api.enums import FINAL_VMI_PHASES, RunStrategy
from kubevirt_api.enums import VirtualMachineInstancePhase as Phase

from .runstrategy import _parse_time

__all__ = ["printable_status"]

_IMAGE_ERRORS = ("ErrImagePull", "ImagePullBackOff")


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _condition(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for c in _map(obj.get("status")).get("conditions") or ():
        if _map(c).get("type") == kind:
            return _map(c)
    return None


def _waiting_reason(pod: Mapping[str, Any] | None) -> str:
    if pod is None:
        return ""
    status = _map(pod.get("status"))
    for key in ("initContainerStatuses", "containerStatuses"):
        for cs in status.get(key) or ():
            reason = _map(_map(_map(cs).get("state")).get("waiting")).get("reason")
            if isinstance(reason, str) and reason:
                return reason
    return ""


def printable_status(
    vm: Mapping[str, Any],
    vmi: Mapping[str, Any] | None,
    pod: Mapping[str, Any] | None,
    now: dt.datetime,
) -> str:
    """Terminating, Stopping, Migrating, ErrorUnschedulable, ErrImagePull, CrashLoopBackOff,
    Paused, Running, Starting, Stopped or Unknown (first that applies, upstream's order)."""
    if _map(vm.get("metadata")).get("deletionTimestamp"):
        return "Terminating"
    phase = str(_map(_map(vmi).get("status")).get("phase") or "") if vmi is not None else ""
    final = phase in FINAL_VMI_PHASES
    live = vmi is not None and not final
    requests = _map(vm.get("status")).get("stateChangeRequests") or ()
    stop_requested = any(_map(r).get("action") == "Stop" for r in requests)
    if live and vmi is not None:
        if (
            _map(vmi.get("metadata")).get("deletionTimestamp")
            or stop_requested
            or run_strategy(vm) == RunStrategy.HALTED
        ):
            return "Stopping"
        migration = _map(_map(vmi.get("status")).get("migrationState"))
        if migration and not migration.get("completed"):
            return "Migrating"
        scheduled = _condition(vmi, "PodScheduled")
        if (
            scheduled is not None
            and scheduled.get("status") == "False"
            and scheduled.get("reason") == "Unschedulable"
        ):
            return "ErrorUnschedulable"
        reason = _waiting_reason(pod)
        if phase in (Phase.UNSET, Phase.PENDING, Phase.SCHEDULING) and reason in _IMAGE_ERRORS:
            return reason
    failure = _map(_map(vm.get("status")).get("startFailure"))
    if failure and (vmi is None or final):
        retry_at = _parse_time(failure.get("retryAfterTimestamp"))
        if retry_at is not None and retry_at > now and run_strategy(vm) != RunStrategy.HALTED:
            return "CrashLoopBackOff"
    if vmi is None or final:
        return "Stopped"
    paused = _condition(vmi, "Paused")
    if paused is not None and paused.get("status") == "True":
        return "Paused"
    if phase == Phase.RUNNING:
        return "Running"
    if phase in (Phase.UNSET, Phase.PENDING, Phase.SCHEDULING, Phase.SCHEDULED):
        return "Starting"
    return "Unknown"
