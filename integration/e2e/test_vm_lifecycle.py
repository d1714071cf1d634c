"""A user's VM on the real cluster: apply -> Running -> console marker; stop; start."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import urllib.request
from typing import Any


def test_applied_vm_runs_shows_its_marker_stops_and_starts_again(
    kubevirt: Any, namespace: str
) -> None:
    kubevirt.apply(kubevirt.vm("tiny"), namespace)
    vmi = kubevirt.wait_running("tiny", namespace)
    assert vmi["status"]["nodeName"] == kubevirt.node
    # Ready mirrors the launcher pod's (as upstream): it may follow the phase a moment later.
    kubevirt.wait_for(
        "the VMI Ready", lambda: _conditions(kubevirt, namespace).get("Ready") == "True", 30
    )
    assert kubevirt.marker in kubevirt.console_marker("tiny", namespace)
    _pause_and_unpause(kubevirt, namespace)
    _vnc_speaks_rfb(kubevirt, namespace)
    _metrics_and_heartbeat(kubevirt)

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


def _conditions(kubevirt: Any, namespace: str) -> dict[str, str]:
    vmi = kubevirt.get("vmi", "tiny", namespace) or {}
    return {c["type"]: c["status"] for c in vmi.get("status", {}).get("conditions", [])}


def _pause_and_unpause(kubevirt: Any, namespace: str) -> None:
    paused = kubevirt.virtctl("pause", "vmi", "tiny", "-n", namespace)
    assert paused.returncode == 0, paused.stderr
    kubevirt.wait_for(
        "the Paused condition", lambda: _conditions(kubevirt, namespace).get("Paused") == "True", 60
    )
    # virt-controller flips the pod's readiness gate; Ready follows the pod's.
    kubevirt.wait_for(
        "Ready False while paused",
        lambda: _conditions(kubevirt, namespace).get("Ready") == "False",
        30,
    )
    resumed = kubevirt.virtctl("unpause", "vmi", "tiny", "-n", namespace)
    assert resumed.returncode == 0, resumed.stderr
    kubevirt.wait_for(
        "Ready again without Paused",
        lambda: (
            _conditions(kubevirt, namespace).get("Ready") == "True"
            and "Paused" not in _conditions(kubevirt, namespace)
        ),
        60,
    )


def _vnc_speaks_rfb(kubevirt: Any, namespace: str) -> None:
    proxy = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "virtctl",
            "vnc",
            "tiny",
            "--proxy-only",
            "-n",
            namespace,
            f"--kubeconfig={kubevirt.kubeconfig}",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proxy.stdout is not None
        port = json.loads(proxy.stdout.readline())["port"]
        with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
            conn.settimeout(30)
            banner = b""
            while not banner.endswith(b"\n"):
                chunk = conn.recv(12 - len(banner))
                assert chunk, "the VNC stream closed before the RFB banner"
                banner += chunk
        assert banner.startswith(b"RFB 003."), banner
    finally:
        proxy.send_signal(signal.SIGINT)
        proxy.wait(timeout=30)


def _metrics_and_heartbeat(kubevirt: Any) -> None:
    url = kubevirt.handler.metrics_url()

    def vmi_series() -> str | None:
        with urllib.request.urlopen(url, timeout=10) as response:
            text = response.read().decode()
        found = "kubevirt_vmi_cpu_usage_seconds_total{" in text and 'name="tiny"' in text
        return text if found else None

    text = kubevirt.wait_for("kubevirt_vmi_* series for the guest", vmi_series, 90)
    # upstream's: no labels of its own (Prometheus adds the pod's), and counters for totals
    assert "kubevirt_virt_handler_ready_status 1.0" in text
    assert "# TYPE kubevirt_vmi_cpu_usage_seconds_total counter" in text
    assert "kubevirt_vmi_memory_resident_bytes{" in text
    node = json.loads(kubevirt.kubectl.run("get", "node", kubevirt.node, "-o", "json").stdout)
    assert "kubevirt.io/heartbeat" in node["metadata"]["annotations"]
    assert node["metadata"]["labels"]["kubevirt.io/schedulable"] == "true"
