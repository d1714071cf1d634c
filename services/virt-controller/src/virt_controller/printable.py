"""The VM's status.printableStatus, as upstream derives it from the VM and its VMI."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from kubevirt_api import run_strategy
from kubevirt_api.conditions import ERR_IMAGE_PULL, IMAGE_PULL_BACK_OFF
from kubevirt_api.enums import FINAL_VMI_PHASES, RunStrategy
from kubevirt_api.enums import VirtualMachineInstancePhase as Phase
from kubevirt_api.enums import VirtualMachinePrintableStatus as Printable

from .objects import condition, deleting, mapping
from .objects import phase as phase_of
from .runstrategy import _parse_time

__all__ = ["printable_status"]

# The VMI's Synchronized=False reasons that name a printableStatus of their own.
_SYNC_REASONS = {
    "FailedPvcNotFound": Printable.ERROR_PVC_NOT_FOUND,
    ERR_IMAGE_PULL: Printable.ERR_IMAGE_PULL,
    IMAGE_PULL_BACK_OFF: Printable.IMAGE_PULL_BACK_OFF,
}
_RESTARTING = (RunStrategy.ALWAYS, RunStrategy.RERUN_ON_FAILURE, RunStrategy.ONCE)


def printable_status(vm: Mapping[str, Any], vmi: Mapping[str, Any] | None, now: dt.datetime) -> str:
    """The first of upstream's statuses that applies, in upstream's order: Terminating,
    Stopping, Migrating, Paused, Running, ErrorPvcNotFound, ErrorUnschedulable,
    ErrImagePull, ImagePullBackOff, Starting, CrashLoopBackOff, Stopped, else Unknown.
    CrashLoopBackOff holds while a counted start failure's retry time is ahead (upstream
    does not look at the time; a VM whose back-off ran out gets its VMI at once anyway,
    and a VM left stopped by RerunOnFailure reads Stopped here, not CrashLoopBackOff).
    """
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
        paused = condition(vmi, "Paused")
        if phase == Phase.RUNNING:
            if paused is not None and paused.get("status") == "True":
                return Printable.PAUSED
            return Printable.RUNNING
        synced = condition(vmi, "Synchronized")
        if synced is not None and synced.get("status") == "False":
            by_reason = _SYNC_REASONS.get(str(synced.get("reason") or ""))
            if by_reason == Printable.ERROR_PVC_NOT_FOUND:
                return by_reason
        scheduled = condition(vmi, "PodScheduled")
        if (
            scheduled is not None
            and scheduled.get("status") == "False"
            and scheduled.get("reason") == "Unschedulable"
        ):
            return Printable.ERROR_UNSCHEDULABLE
        if synced is not None and synced.get("status") == "False":
            by_reason = _SYNC_REASONS.get(str(synced.get("reason") or ""))
            if by_reason is not None:
                return by_reason
        if phase in (Phase.UNSET, Phase.PENDING, Phase.SCHEDULING, Phase.SCHEDULED):
            return Printable.STARTING
        return Printable.UNKNOWN
    failure = mapping(mapping(vm.get("status")).get("startFailure"))
    retry_at = _parse_time(failure.get("retryAfterTimestamp"))
    if (
        int(failure.get("consecutiveFailCount") or 0) > 0
        and run_strategy(vm) in _RESTARTING
        and retry_at is not None
        and retry_at > now
    ):
        return Printable.CRASH_LOOP_BACK_OFF
    return Printable.STOPPED
