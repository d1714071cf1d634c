"""start/stop/restart plans follow upstream's run-strategy rules."""

from __future__ import annotations

from typing import Any

from virt_api.lifecycle import Conflict, Invalid, Plan, plan_restart, plan_start, plan_stop


def vm(
    strategy: str | None = None, running: bool | None = None, status: dict[str, Any] | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {"template": {"spec": {}}}
    if strategy is not None:
        spec["runStrategy"] = strategy
    if running is not None:
        spec["running"] = running
    return {"metadata": {"name": "vm1"}, "spec": spec, "status": status or {}}


def vmi(phase: str = "Running", grace: int | None = None) -> dict[str, Any]:
    spec = {} if grace is None else {"terminationGracePeriodSeconds": grace}
    return {"metadata": {"uid": "vmi-uid"}, "spec": spec, "status": {"phase": phase}}


def test_start_halted_flips_run_strategy() -> None:
    plan = plan_start(vm("Halted"), None)
    assert isinstance(plan, Plan)
    assert plan.patches[0].target == "vm"
    assert plan.patches[0].ops == [
        {"op": "test", "path": "/spec/runStrategy", "value": "Halted"},
        {"op": "replace", "path": "/spec/runStrategy", "value": "Always"},
    ]


def test_start_legacy_running_false_patches_running() -> None:
    plan = plan_start(vm(running=False), None)
    assert isinstance(plan, Plan)
    assert plan.patches[0].ops[-1] == {"op": "replace", "path": "/spec/running", "value": True}


def test_start_manual_sends_state_change_request() -> None:
    plan = plan_start(vm("Manual"), None)
    assert isinstance(plan, Plan)
    assert plan.patches[0].target == "vm-status"
    assert plan.patches[0].ops == [
        {"op": "add", "path": "/status", "value": {"stateChangeRequests": [{"action": "Start"}]}}
    ]


def test_start_running_vm_conflicts() -> None:
    assert plan_start(vm("Halted"), vmi("Running")) == Conflict("VM is already running")
    assert isinstance(plan_start(vm("Always"), None), Conflict)


def test_stop_always_flips_to_halted() -> None:
    plan = plan_stop(vm("Always"), vmi())
    assert isinstance(plan, Plan)
    assert plan.patches[-1].ops[-1] == {
        "op": "replace",
        "path": "/spec/runStrategy",
        "value": "Halted",
    }


def test_stop_with_grace_period_patches_vmi_first() -> None:
    plan = plan_stop(vm("Always"), vmi(grace=180), grace_period=0)
    assert isinstance(plan, Plan)
    assert plan.patches[0].target == "vmi"
    assert plan.patches[0].ops[1] == {
        "op": "replace",
        "path": "/spec/terminationGracePeriodSeconds",
        "value": 0,
    }


def test_stop_manual_replaces_pending_requests_with_stop() -> None:
    pending = [{"action": "Start"}]
    plan = plan_stop(
        vm("Manual", status={"stateChangeRequests": pending, "startFailure": {}}), vmi()
    )
    assert isinstance(plan, Plan)
    assert plan.patches[0].ops == [
        {"op": "test", "path": "/status/stateChangeRequests", "value": pending},
        {
            "op": "replace",
            "path": "/status/stateChangeRequests",
            "value": [{"action": "Stop", "uid": "vmi-uid"}],
        },
        {"op": "remove", "path": "/status/startFailure"},
    ]


def test_stop_halted_needs_shorter_grace_and_live_vmi() -> None:
    assert isinstance(plan_stop(vm("Halted"), None), Conflict)
    assert isinstance(plan_stop(vm("Halted"), vmi(grace=30)), Conflict)
    assert isinstance(plan_stop(vm("Halted"), vmi(grace=30), grace_period=5), Plan)
    assert isinstance(plan_stop(vm("Always"), vmi(), grace_period=-1), Invalid)


def test_restart_requests_stop_then_start() -> None:
    plan = plan_restart(vm("Always", status={"created": True}), vmi())
    assert isinstance(plan, Plan)
    assert plan.patches[0].ops == [
        {
            "op": "add",
            "path": "/status/stateChangeRequests",
            "value": [{"action": "Stop", "uid": "vmi-uid"}, {"action": "Start"}],
        }
    ]


def test_restart_refusals() -> None:
    assert isinstance(plan_restart(vm("Halted"), vmi()), Conflict)
    assert isinstance(plan_restart(vm("Always"), None), Conflict)
    assert isinstance(plan_restart(vm("Always"), vmi(), grace_period=5), Invalid)
    busy = vm("Always", status={"stateChangeRequests": [{"action": "Start"}]})
    assert isinstance(plan_restart(busy, vmi()), Conflict)
