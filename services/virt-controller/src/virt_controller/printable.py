"""The VM's status.printableStatus, as upstream derives it from the VM, VMI and pod."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from kubevirt_api import run_strategy
from kubevirt_api.enums import FINAL_VMI_PHASES, RunStrategy
from kubevirt_api.enums import VirtualMachineInstancePhase as Phase
from kubevirt_api.enums import VirtualMachinePrintableStatus as Printable

from .objects import condition, deleting, mapping
from .objects import phase as phase_of
from .runstrategy import _parse_time

__all__ = ["printable_status"]

_IMAGE_ERRORS = (Printable.ERR_IMAGE_PULL, Printable.IMAGE_PULL_BACK_OFF)


def _waiting_reason(pod: Mapping[str, Any] | None) -> str:
    if pod is None:
        return ""
    status = mapping(pod.get("status"))
    for key in ("initContainerStatuses", "containerStatuses"):
        for cs in status.get(key) or ():
            reason = mapping(mapping(mapping(cs).get("state")).get("waiting")).get("reason")
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
    if deleting(vm):
        return Printable.TERMINATING
    phase = phase_of(vmi)
    final = phase in FINAL_VMI_PHASES
    live = vmi is not None and not final
    requests = mapping(vm.get("status")).get("stateChangeRequests") or ()
    stop_requested = any(mapping(r).get("action") == "Stop" for r in requests)
    if live and vmi is not None:
        if deleting(vmi) or stop_requested or run_strategy(vm) == RunStrategy.HALTED:
            return Printable.STOPPING
        migration = mapping(mapping(vmi.get("status")).get("migrationState"))
        if migration and not migration.get("completed"):
            return Printable.MIGRATING
        scheduled = condition(vmi, "PodScheduled")
        if (
            scheduled is not None
            and scheduled.get("status") == "False"
            and scheduled.get("reason") == "Unschedulable"
        ):
            return Printable.ERROR_UNSCHEDULABLE
        reason = _waiting_reason(pod)
        if phase in (Phase.UNSET, Phase.PENDING, Phase.SCHEDULING) and reason in _IMAGE_ERRORS:
            return reason
    failure = mapping(mapping(vm.get("status")).get("startFailure"))
    if failure and (vmi is None or final):
        retry_at = _parse_time(failure.get("retryAfterTimestamp"))
        if retry_at is not None and retry_at > now and run_strategy(vm) != RunStrategy.HALTED:
            return Printable.CRASH_LOOP_BACK_OFF
    if vmi is None or final:
        return Printable.STOPPED
    paused = condition(vmi, "Paused")
    if paused is not None and paused.get("status") == "True":
        return Printable.PAUSED
    if phase == Phase.RUNNING:
        return Printable.RUNNING
    if phase in (Phase.UNSET, Phase.PENDING, Phase.SCHEDULING, Phase.SCHEDULED):
        return Printable.STARTING
    return Printable.UNKNOWN
