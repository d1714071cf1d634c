"""A user's VM on the real cluster: apply -> Running -> console marker; stop; start."""

from __future__ import annotations

from typing import Any


def test_applied_vm_runs_shows_its_marker_stops_and_starts_again(
    kubevirt: Any, namespace: str
) -> None:
    kubevirt.apply(kubevirt.vm("tiny"), namespace)
    vmi = kubevirt.wait_running("tiny", namespace)
    assert vmi["status"]["nodeName"] == kubevirt.node
    ready = [c for c in vmi["status"].get("conditions", []) if c["type"] == "Ready"]
    assert ready[0]["status"] == "True"
    assert kubevirt.marker in kubevirt.console_marker("tiny", namespace)

    stopped = kubevirt.virtctl("stop", "tiny", "-n", namespace)
    assert stopped.returncode == 0, stopped.stderr
    kubevirt.wait_for(
        "the VMI to be gone", lambda: kubevirt.get("vmi", "tiny", namespace) is None, 120
    )

    def no_launcher_pod() -> bool:
        pods = kubevirt.kubectl.run(
            "get", "pods", "-n", namespace, "-l", "kubevirt.io=virt-launcher", "-o", "name"
        ).stdout.split()
        return not pods

    kubevirt.wait_for("the launcher pod to be gone", no_launcher_pod, 120)

    started = kubevirt.virtctl("start", "tiny", "-n", namespace)
    assert started.returncode == 0, started.stderr
    again = kubevirt.wait_running("tiny", namespace)
    assert again["metadata"]["uid"] != vmi["metadata"]["uid"]
    assert kubevirt.marker in kubevirt.console_marker("tiny", namespace)
