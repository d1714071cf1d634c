"""A guest that powers itself off: Always starts a new VMI, RerunOnFailure does not. A pod
stopped under a running guest is a failure: RerunOnFailure starts it again."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

POWEROFF_MARKER = "KUBEVIRT-PY-GUEST-POWEROFF"


def _power_off_from_inside(kubevirt: Any, name: str, namespace: str) -> None:
    kubevirt.console_marker(name, namespace)  # the shell is up once the marker is out
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "virtctl",
            "console",
            name,
            "-n",
            namespace,
            f"--until={POWEROFF_MARKER}",
            "--timeout-seconds=60",
            f"--kubeconfig={kubevirt.kubeconfig}",
        ],
        input="\npoweroff\n",
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr


def _wait_for_a_new_vmi(kubevirt: Any, first: dict[str, Any], whose: str) -> None:
    """Until the VM of VMI `first` has a VMI of another uid."""
    name, namespace = first["metadata"]["name"], first["metadata"]["namespace"]

    def replaced() -> dict[str, Any] | None:
        vmi = kubevirt.get("vmi", name, namespace)
        if vmi and vmi["metadata"]["uid"] != first["metadata"]["uid"]:
            return vmi
        return None

    kubevirt.wait_for(f"a new VMI for {whose}", replaced, 180)


def test_always_replaces_a_vmi_whose_guest_powered_off(kubevirt: Any, namespace: str) -> None:
    kubevirt.apply(kubevirt.vm("always"), namespace)
    first = kubevirt.wait_running("always", namespace)
    _power_off_from_inside(kubevirt, "always", namespace)
    _wait_for_a_new_vmi(kubevirt, first, "runStrategy Always")
    kubevirt.wait_running("always", namespace)
    assert kubevirt.marker in kubevirt.console_marker("always", namespace)


def test_rerun_on_failure_leaves_a_powered_off_guest_off(kubevirt: Any, namespace: str) -> None:
    kubevirt.apply(kubevirt.vm("rerun", "RerunOnFailure"), namespace)
    first = kubevirt.wait_running("rerun", namespace)
    _power_off_from_inside(kubevirt, "rerun", namespace)
    kubevirt.wait_for(
        "the VMI to succeed", lambda: kubevirt.phase("rerun", namespace) == "Succeeded", 120
    )
    # Succeeded is final for RerunOnFailure: the VM controller keeps it, no new VMI comes.
    vm = kubevirt.wait_for(
        "the VM to report it stopped",
        lambda: (
            v
            if (v := kubevirt.get("vm", "rerun", namespace))
            and v.get("status", {}).get("printableStatus") in ("Stopped", "Succeeded")
            else None
        ),
        60,
    )
    vmi = kubevirt.get("vmi", "rerun", namespace)
    assert vmi is None or vmi["metadata"]["uid"] == first["metadata"]["uid"], vm["status"]


def test_rerun_on_failure_restarts_a_vm_whose_pod_was_deleted(
    kubevirt: Any, namespace: str
) -> None:
    # The guest powers off cleanly on the launcher's SIGTERM, yet nobody stopped the VM:
    # the VMI fails (upstream says Succeeded and leaves the VM down, kubevirt#9823).
    kubevirt.apply(kubevirt.vm("podgone", "RerunOnFailure"), namespace)
    first = kubevirt.wait_running("podgone", namespace)
    pods = kubevirt.kubectl.run(
        "get",
        "pods",
        "-n",
        namespace,
        "-l",
        f"kubevirt.io/created-by={first['metadata']['uid']}",
        "-o",
        "name",
    ).stdout.split()
    assert len(pods) == 1, pods
    kubevirt.kubectl.run("delete", "-n", namespace, pods[0], "--wait=false")
    _wait_for_a_new_vmi(kubevirt, first, "the RerunOnFailure VM")
    kubevirt.wait_running("podgone", namespace)
    assert kubevirt.marker in kubevirt.console_marker("podgone", namespace)
    stopped = kubevirt.kubectl.run(
        "get",
        "events",
        "-n",
        namespace,
        "--field-selector",
        f"involvedObject.uid={first['metadata']['uid']},reason=Stopped",
        "-o",
        "jsonpath={.items[*].message}",
    ).stdout
    assert "pod was stopped while it ran" in stopped, stopped
