"""A migration's next phase from what the informers show (upstream's updateStatus): pure.

Pending (accepted, no target pod yet) -> Scheduling (target pod exists) -> Scheduled (target
pod ready) -> PreparingTarget (handed off: the VMI's migrationState names this migration and
its target node) -> TargetReady (the target handler published its address) -> Running (the
source handler started: startTimestamp) -> Succeeded (completed). Failed, at any point, when
the VMI is gone or finished, the target pod ended or vanished, the handlers report failure,
another migration took the VMI over, or the migration was cancelled before hand-off.
Each call moves at most one step; the status write wakes the controller for the next.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kube_runtime.events import EventType
from kubevirt_api.enums import FINAL_VMI_PHASES
from kubevirt_api.enums import VirtualMachineInstanceMigrationPhase as Phase

from .objects import condition, deleting, mapping, phase, pod_down, pod_ready, uid

__all__ = [
    "ABORT_REQUESTED",
    "Decision",
    "decide",
    "handed_off_phase",
    "migration_state",
    "running_phase",
    "target_created_phase",
]

# The condition type is upstream's (VirtualMachineInstanceMigrationAbortRequested).
ABORT_REQUESTED = "migrationAbortRequested"
# VMI conditions that hold a completed migration back from Succeeded (hotplug follow-ups).
_BLOCKING_CONDITIONS = (
    ("HotVCPUChange", None),
    ("HotMemoryChange", "True"),
    ("MigrationRequired", "True"),
)


@dataclass(frozen=True, slots=True)
class Decision:
    """The phase to write, and the Event recording why (None: nothing to say)."""

    phase: str
    #: (type, reason, message) of the Event on the migration.
    event: tuple[EventType, str, str] | None = None
    #: Add the AbortRequested condition (the migration was deleted).
    abort_requested: bool = False


def migration_state(vmi: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """The VMI's status.migrationState (empty when it has none)."""
    return mapping(mapping((vmi or {}).get("status")).get("migrationState"))


def target_created_phase(current: str) -> bool:
    """Past Pending: the target pod should exist (upstream's TargetIsCreated)."""
    return current not in (Phase.UNSET, Phase.PENDING)


def handed_off_phase(current: str) -> bool:
    """Past Scheduled: virt-handler owns the rest (upstream's TargetIsHandedOff)."""
    return current not in (Phase.UNSET, Phase.PENDING, Phase.SCHEDULING, Phase.SCHEDULED)


def running_phase(current: str) -> bool:
    """Counts against the parallel limits (upstream's IsRunning)."""
    return current not in (Phase.UNSET, Phase.PENDING, Phase.SUCCEEDED, Phase.FAILED)


def _failed(message: str) -> Decision:
    return Decision(Phase.FAILED, ("Warning", "FailedMigration", message))


def decide(
    migration: Mapping[str, Any],
    vmi: Mapping[str, Any] | None,
    target: Mapping[str, Any] | None,
    *,
    handed_off: bool,
    can_migrate: bool,
) -> Decision:
    """The migration's next phase. `handed_off`: the controller handed it to the handlers
    (the VMI's state names it, or the patch was just sent); `can_migrate`: no other
    unfinished migration holds the VMI."""
    current = str(mapping(migration.get("status")).get("phase") or "")
    if current in (Phase.SUCCEEDED, Phase.FAILED):
        return Decision(current)
    if vmi is None:
        return _failed("Migration failed because vmi does not exist.")
    if phase(vmi) in FINAL_VMI_PHASES:
        return _failed("Migration failed vmi shutdown during migration.")
    if deleting(migration) and not handed_off:
        return Decision(
            Phase.FAILED,
            ("Warning", "FailedMigration", "Migration failed due to being canceled"),
            abort_requested=True,
        )
    if target is not None and pod_down(target):
        return _failed("Migration failed because target pod shutdown during migration")
    if target_created_phase(current) and target is None:
        return _failed("Migration target pod was removed during active migration.")
    state = migration_state(vmi)
    ours = bool(state) and state.get("migrationUid") == uid(migration)
    if handed_off_phase(current) and not state:
        return _failed("VMI's migration state was cleared during the active migration.")
    if handed_off_phase(current) and not ours:
        return _failed(
            "VMI's migration state was taken over by another migration job during active migration."
        )
    if ours and state.get("failed") is True:
        return _failed("source node reported migration failed")
    if deleting(migration) and condition(migration, ABORT_REQUESTED) is None:
        return Decision(current or Phase.PENDING, abort_requested=True)
    return _next(current, vmi, target, state, ours=ours, can_migrate=can_migrate)


def _next(
    current: str,
    vmi: Mapping[str, Any],
    target: Mapping[str, Any] | None,
    state: Mapping[str, Any],
    *,
    ours: bool,
    can_migrate: bool,
) -> Decision:
    if current == Phase.UNSET:
        if can_migrate:
            return Decision(Phase.PENDING)
        return _failed(
            "VMI is not eligible for migration because another migration job is in progress."
        )
    if current == Phase.PENDING and target is not None:
        return Decision(Phase.SCHEDULING)
    if current == Phase.SCHEDULING and target is not None and pod_ready(target):
        return Decision(Phase.SCHEDULED)
    if current == Phase.SCHEDULED and ours and state.get("targetNode"):
        return Decision(Phase.PREPARING_TARGET)
    ready = state.get("targetNode") and state.get("targetNodeAddress")
    if current == Phase.PREPARING_TARGET and ready:
        return Decision(Phase.TARGET_READY)
    if current == Phase.TARGET_READY and state.get("startTimestamp"):
        return Decision(Phase.RUNNING)
    if current == Phase.RUNNING and state.get("completed") is True and not _held_back(vmi):
        return Decision(
            Phase.SUCCEEDED,
            ("Normal", "SuccessfulMigration", "Source node reported migration succeeded"),
        )
    return Decision(current)


def _held_back(vmi: Mapping[str, Any]) -> bool:
    for kind, status in _BLOCKING_CONDITIONS:
        found = condition(vmi, kind)
        if found is not None and (status is None or found.get("status") == status):
            return True
    return False
