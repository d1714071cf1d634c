"""status.printableStatus from the VM, its VMI and the launcher pod."""

from __future__ import annotations

import datetime as dt
from typing import Any

from virt_controller.printable import printable_status

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def vm(strategy: str = "Always", **status: Any) -> dict[str, Any]:
    return {"metadata": {}, "spec": {"runStrategy": strategy}, "status": status}


def vmi(phase: str, *conditions: dict[str, str], deleting: bool = False) -> dict[str, Any]:
    meta = {"deletionTimestamp": "2026-01-01T00:00:00Z"} if deleting else {}
    return {"metadata": meta, "status": {"phase": phase, "conditions": list(conditions)}}


def test_basic_lifecycle() -> None:
    assert printable_status(vm(), None, None, NOW) == "Stopped"
    assert printable_status(vm(), vmi("Pending"), None, NOW) == "Starting"
    assert printable_status(vm(), vmi("Scheduled"), None, NOW) == "Starting"
    assert printable_status(vm(), vmi("Running"), None, NOW) == "Running"
    assert printable_status(vm(), vmi("Succeeded"), None, NOW) == "Stopped"


def test_stopping_and_terminating() -> None:
    assert printable_status(vm("Halted"), vmi("Running"), None, NOW) == "Stopping"
    assert printable_status(vm(), vmi("Running", deleting=True), None, NOW) == "Stopping"
    deleted = vm()
    deleted["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert printable_status(deleted, vmi("Running"), None, NOW) == "Terminating"


def test_unschedulable() -> None:
    cond = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
    assert printable_status(vm(), vmi("Scheduling", cond), None, NOW) == "ErrorUnschedulable"


def test_image_pull_errors_from_the_pod() -> None:
    pod = {
        "status": {"containerStatuses": [{"state": {"waiting": {"reason": "ImagePullBackOff"}}}]}
    }
    assert printable_status(vm(), vmi("Scheduling"), pod, NOW) == "ImagePullBackOff"


def test_crash_loop_while_backing_off() -> None:
    failure = {"consecutiveFailCount": 2, "retryAfterTimestamp": "2026-01-01T00:01:00Z"}
    assert printable_status(vm(startFailure=failure), None, None, NOW) == "CrashLoopBackOff"
    later = NOW + dt.timedelta(minutes=5)
    assert printable_status(vm(startFailure=failure), None, None, later) == "Stopped"


def test_paused() -> None:
    cond = {"type": "Paused", "status": "True"}
    assert printable_status(vm(), vmi("Running", cond), None, NOW) == "Paused"
