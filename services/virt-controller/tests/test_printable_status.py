"""status.printableStatus from the VM and its VMI, in upstream's order."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from virt_controller.printable import printable_status

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def vm(strategy: str = "Always", **status: Any) -> dict[str, Any]:
    return {"metadata": {}, "spec": {"runStrategy": strategy}, "status": status}


def vmi(phase: str, *conditions: dict[str, str], deleting: bool = False) -> dict[str, Any]:
    meta = {"deletionTimestamp": "2026-01-01T00:00:00Z"} if deleting else {}
    return {"metadata": meta, "status": {"phase": phase, "conditions": list(conditions)}}


def synchronized(reason: str) -> dict[str, str]:
    return {"type": "Synchronized", "status": "False", "reason": reason}


def test_basic_lifecycle() -> None:
    assert printable_status(vm(), None, NOW) == "Stopped"
    assert printable_status(vm(), vmi("Pending"), NOW) == "Starting"
    assert printable_status(vm(), vmi("Scheduled"), NOW) == "Starting"
    assert printable_status(vm(), vmi("Running"), NOW) == "Running"
    assert printable_status(vm(), vmi("Succeeded"), NOW) == "Stopped"


def test_stopping_and_terminating() -> None:
    assert printable_status(vm("Halted"), vmi("Running"), NOW) == "Stopping"
    assert printable_status(vm(), vmi("Running", deleting=True), NOW) == "Stopping"
    deleted = vm()
    deleted["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert printable_status(deleted, vmi("Running"), NOW) == "Terminating"


def test_unschedulable() -> None:
    cond = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
    assert printable_status(vm(), vmi("Scheduling", cond), NOW) == "ErrorUnschedulable"


@pytest.mark.parametrize("reason", ["ErrImagePull", "ImagePullBackOff"])
@pytest.mark.parametrize("phase", ["Scheduling", "Scheduled"])
def test_image_pull_errors_from_the_vmis_synchronized_condition(phase: str, reason: str) -> None:
    assert printable_status(vm(), vmi(phase, synchronized(reason)), NOW) == reason


def test_a_missing_pvc_wins_over_unschedulable_and_a_pull_error_loses_to_it() -> None:
    unschedulable = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
    pvc = vmi("Pending", synchronized("FailedPvcNotFound"), unschedulable)
    assert printable_status(vm(), pvc, NOW) == "ErrorPvcNotFound"
    pull = vmi("Scheduling", synchronized("ErrImagePull"), unschedulable)
    assert printable_status(vm(), pull, NOW) == "ErrorUnschedulable"


def test_other_synchronized_failures_still_read_starting() -> None:
    assert printable_status(vm(), vmi("Pending", synchronized("FailedCreate")), NOW) == "Starting"


def test_a_running_vmi_is_running_whatever_synchronized_says() -> None:
    assert printable_status(vm(), vmi("Running", synchronized("ErrImagePull")), NOW) == "Running"


def test_crash_loop_while_a_counted_start_failure_backs_off() -> None:
    failure = {"consecutiveFailCount": 2, "retryAfterTimestamp": "2026-01-01T00:01:00Z"}
    later = NOW + dt.timedelta(minutes=5)
    assert printable_status(vm(startFailure=failure), vmi("Failed"), later) == "Stopped"
    assert printable_status(vm(startFailure=failure), None, NOW) == "CrashLoopBackOff"
    assert printable_status(vm(startFailure=failure), vmi("Failed"), NOW) == "CrashLoopBackOff"
    assert printable_status(vm("Halted", startFailure=failure), None, NOW) == "Stopped"
    assert printable_status(vm(startFailure=failure), vmi("Scheduling"), NOW) == "Starting"


def test_paused() -> None:
    cond = {"type": "Paused", "status": "True"}
    assert printable_status(vm(), vmi("Running", cond), NOW) == "Paused"
