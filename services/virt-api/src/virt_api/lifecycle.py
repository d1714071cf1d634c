"""VM start/stop/restart as upstream: runStrategy patches or status.stateChangeRequests.

Pure planning: given the VM and its VMI (or None) these return the JSON patches to send
(each touching only the fields virt-api owns) or a Conflict explaining why not.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from kube_runtime import JsonPatchOp
from kubevirt_api import run_strategy
from kubevirt_api.enums import FINAL_VMI_PHASES, RunStrategy
from kubevirt_api.enums import VirtualMachineInstancePhase as Phase

__all__ = [
    "Conflict",
    "Invalid",
    "Patch",
    "Plan",
    "plan_restart",
    "plan_start",
    "plan_stop",
    "vmi_is_final",
]

Target = Literal["vm", "vm-status", "vmi"]


@dataclass(frozen=True, slots=True)
class Patch:
    """One JSON patch against the VM, its status subresource, or the VMI."""

    target: Target
    ops: list[JsonPatchOp]


@dataclass(frozen=True, slots=True)
class Plan:
    """The patches to apply, in order."""

    patches: list[Patch] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Conflict:
    """The request does not fit the VM's state (HTTP 409)."""

    message: str


@dataclass(frozen=True, slots=True)
class Invalid:
    """The request body is wrong (HTTP 400)."""

    message: str


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def vmi_phase(vmi: Mapping[str, Any] | None) -> str:
    """The VMI's phase ('' when unset or no VMI)."""
    phase = _map(_map(vmi).get("status")).get("phase")
    return phase if isinstance(phase, str) else ""


def vmi_is_final(vmi: Mapping[str, Any] | None) -> bool:
    """Whether the VMI has finished (Succeeded or Failed)."""
    return vmi_phase(vmi) in FINAL_VMI_PHASES


def _uid(obj: Mapping[str, Any] | None) -> str:
    return str(_map(_map(obj).get("metadata")).get("uid") or "")


def _change_requests(
    vm: Mapping[str, Any], changes: list[dict[str, Any]]
) -> list[JsonPatchOp] | Conflict:
    """Ops adding state change requests, refusing to pile onto one already underway."""
    status = vm.get("status")
    if not isinstance(status, Mapping) or not status:
        return [{"op": "add", "path": "/status", "value": {"stateChangeRequests": changes}}]
    ops: list[JsonPatchOp] = []
    current = status.get("stateChangeRequests")
    if not current:
        ops.append({"op": "add", "path": "/status/stateChangeRequests", "value": changes})
    elif len(changes) == 1 and changes[0]["action"] == "Stop":
        # A stop supersedes whatever was pending.
        ops.append({"op": "test", "path": "/status/stateChangeRequests", "value": current})
        ops.append({"op": "replace", "path": "/status/stateChangeRequests", "value": changes})
    else:
        return Conflict("a start or stop of this VM is already underway; retry when it is done")
    if "startFailure" in status:
        ops.append({"op": "remove", "path": "/status/startFailure"})
    return ops


def _running_ops(vm: Mapping[str, Any], running: bool) -> list[JsonPatchOp]:
    spec = _map(vm.get("spec"))
    if "runStrategy" in spec:
        return [
            {"op": "test", "path": "/spec/runStrategy", "value": spec["runStrategy"]},
            {
                "op": "replace",
                "path": "/spec/runStrategy",
                "value": RunStrategy.ALWAYS if running else RunStrategy.HALTED,
            },
        ]
    if "running" in spec:
        return [
            {"op": "test", "path": "/spec/running", "value": spec["running"]},
            {"op": "replace", "path": "/spec/running", "value": running},
        ]
    return [
        {
            "op": "add",
            "path": "/spec/runStrategy",
            "value": RunStrategy.ALWAYS if running else RunStrategy.HALTED,
        }
    ]


def _manual_recovery(vm: Mapping[str, Any]) -> bool:
    for condition in _map(vm.get("status")).get("conditions") or []:
        c = _map(condition)
        if c.get("type") == "ManualRecoveryRequired" and c.get("status") == "True":
            return True
    return False


def plan_start(
    vm: Mapping[str, Any], vmi: Mapping[str, Any] | None, *, paused: bool = False
) -> Plan | Conflict:
    """Start per run strategy: Halted flips to Always, Manual/RerunOnFailure ask the controller."""
    phase = vmi_phase(vmi)
    if vmi is not None and not vmi_is_final(vmi) and phase not in (Phase.UNSET, Phase.UNKNOWN):
        return Conflict("VM is already running")
    if _manual_recovery(vm):
        return Conflict("VM needs manual recovery after a failed volume migration")
    strategy = run_strategy(vm)
    start: dict[str, Any] = {"action": "Start"}
    if paused:
        start["data"] = {"paused": "true"}
    if strategy == RunStrategy.HALTED:
        template_spec = _map(_map(_map(vm.get("spec")).get("template")).get("spec"))
        if paused and template_spec.get("startStrategy") != "Paused":
            ops = _change_requests(vm, [start])
            return ops if isinstance(ops, Conflict) else Plan([Patch("vm-status", ops)])
        return Plan([Patch("vm", _running_ops(vm, True))])
    if strategy in (RunStrategy.MANUAL, RunStrategy.RERUN_ON_FAILURE):
        if strategy == RunStrategy.RERUN_ON_FAILURE and phase == Phase.FAILED:
            return Conflict("RerunOnFailure does not support starting a VM from the Failed state")
        restart = (strategy == RunStrategy.RERUN_ON_FAILURE and phase == Phase.SUCCEEDED) or (
            strategy == RunStrategy.MANUAL and vmi_is_final(vmi)
        )
        changes = [{"action": "Stop", "uid": _uid(vmi)}, start] if restart else [start]
        ops = _change_requests(vm, changes)
        return ops if isinstance(ops, Conflict) else Plan([Patch("vm-status", ops)])
    return Conflict(f"run strategy {strategy} does not support manual start requests")


def plan_stop(
    vm: Mapping[str, Any], vmi: Mapping[str, Any] | None, *, grace_period: int | None = None
) -> Plan | Conflict | Invalid:
    """Stop per run strategy; a grace period shortens the VMI's termination grace first."""
    if grace_period is not None and grace_period < 0:
        return Invalid("gracePeriod must be at least 0")
    strategy = run_strategy(vm)
    live = vmi is not None and not vmi_is_final(vmi)
    patches: list[Patch] = []
    old_grace: object = None
    if live and grace_period is not None:
        old_grace = _map(_map(vmi).get("spec")).get("terminationGracePeriodSeconds")
        patches.append(
            Patch(
                "vmi",
                [
                    {
                        "op": "test",
                        "path": "/spec/terminationGracePeriodSeconds",
                        "value": old_grace,
                    },
                    {
                        "op": "replace",
                        "path": "/spec/terminationGracePeriodSeconds",
                        "value": grace_period,
                    },
                ]
                if old_grace is not None
                else [
                    {
                        "op": "add",
                        "path": "/spec/terminationGracePeriodSeconds",
                        "value": grace_period,
                    }
                ],
            )
        )
    if strategy in (RunStrategy.HALTED, RunStrategy.MANUAL, RunStrategy.RERUN_ON_FAILURE):
        if not live:
            return Conflict("VM is not running")
        if strategy == RunStrategy.HALTED and (
            grace_period is None or (isinstance(old_grace, int) and grace_period >= old_grace)
        ):
            return Conflict(
                "run strategy Halted only supports stop requests with a shorter grace period"
            )
        ops = _change_requests(vm, [{"action": "Stop", "uid": _uid(vmi)}])
        if isinstance(ops, Conflict):
            return ops
        patches.append(Patch("vm-status", ops))
        return Plan(patches)
    patches.append(Patch("vm", _running_ops(vm, False)))
    return Plan(patches)


def plan_restart(
    vm: Mapping[str, Any], vmi: Mapping[str, Any] | None, *, grace_period: int | None = None
) -> Plan | Conflict | Invalid:
    """Restart = Stop this VMI then Start, as state change requests for the controller."""
    if grace_period is not None and grace_period != 0:
        return Invalid(
            "only gracePeriodSeconds=0 (force restart) is supported"
            if grace_period > 0
            else "gracePeriodSeconds must be at least 0"
        )
    strategy = run_strategy(vm)
    if strategy in (RunStrategy.HALTED, RunStrategy.ONCE):
        return Conflict(f"run strategy {strategy} does not support manual restart requests")
    if vmi is None:
        return Conflict("VM is not running")
    ops = _change_requests(vm, [{"action": "Stop", "uid": _uid(vmi)}, {"action": "Start"}])
    return ops if isinstance(ops, Conflict) else Plan([Patch("vm-status", ops)])
