"""virt-handler killed under a running guest; a launcher's QEMU killed; a planted symlink."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

from kv_cluster.components import ComponentError


def _qemu_pid(namespace: str, name: str) -> int | None:
    out = subprocess.run(
        ["pgrep", "-f", f"guest={namespace}_{name},"], capture_output=True, text=True, check=False
    ).stdout.split()
    return int(out[0]) if out else None


def _restart_handler(kubevirt: Any) -> None:
    """Ready again: host mode starts it as `kv-cluster up` does; pod mode waits for the
    DaemonSet's restarted container. In host mode another session sharing the cluster may
    run `up` at the same moment and win the race: then we wait for its handler."""
    try:
        kubevirt.handler.ensure()
    except ComponentError:
        kubevirt.wait_for(
            "virt-handler to be healthy again", lambda: kubevirt.handler.status().health.ok, 90
        )


def _launcher_sockets_dir(kubevirt: Any, namespace: str, name: str) -> Path:
    vmi = kubevirt.get("vmi", name, namespace)
    assert vmi is not None
    [pod_uid] = vmi["status"]["activePods"].keys()
    return (
        kubevirt.handler.node.kubelet_root
        / "pods"
        / pod_uid
        / "volumes"
        / "kubernetes.io~empty-dir"
        / "sockets"
    )


def test_guest_survives_a_killed_handler_and_is_readopted(kubevirt: Any, namespace: str) -> None:
    kubevirt.apply(kubevirt.vm("survivor"), namespace)
    kubevirt.wait_running("survivor", namespace)
    qemu = _qemu_pid(namespace, "survivor")
    assert qemu is not None
    os.kill(kubevirt.handler_pid(), signal.SIGKILL)
    _restart_handler(kubevirt)
    assert _qemu_pid(namespace, "survivor") == qemu  # the same guest process
    assert kubevirt.phase("survivor", namespace) == "Running"
    # Re-adopted: the relay reaches it again through the new handler.
    assert kubevirt.marker in kubevirt.console_marker("survivor", namespace)
    assert kubevirt.phase("survivor", namespace) == "Running"


def test_killing_the_launchers_qemu_fails_the_vmi(kubevirt: Any, namespace: str) -> None:
    kubevirt.apply(kubevirt.vm("crashy", "Manual"), namespace)
    kubevirt.virtctl("start", "crashy", "-n", namespace)
    kubevirt.wait_running("crashy", namespace)
    qemu = _qemu_pid(namespace, "crashy")
    assert qemu is not None
    os.kill(qemu, signal.SIGKILL)
    kubevirt.wait_for(
        "the VMI to fail", lambda: kubevirt.phase("crashy", namespace) == "Failed", 120
    )


def test_a_symlink_at_the_launcher_socket_is_refused_and_logged(
    kubevirt: Any, namespace: str
) -> None:
    kubevirt.apply(kubevirt.vm("planted"), namespace)
    kubevirt.wait_running("planted", namespace)
    sockets = _launcher_sockets_dir(kubevirt, namespace, "planted")
    os.kill(kubevirt.handler_pid(), signal.SIGKILL)
    real = sockets / "launcher-sock.real"
    (sockets / "launcher-sock").rename(real)
    (sockets / "launcher-sock").symlink_to(real)
    log = kubevirt.handler.log
    offset = log.stat().st_size
    try:
        _restart_handler(kubevirt)

        def refusal() -> str | None:
            text = log.read_text(errors="replace")[offset:]
            for line in text.splitlines():
                # A JSON line: msg "refusing the launcher", what "socket", the VMI's name.
                if "refusing the launcher" in line and '"socket"' in line and "symlink" in line:
                    return line
            return None

        line = kubevirt.wait_for("the handler to log the refusal", refusal, 60)
        assert "planted" in line

        def warning() -> dict | None:
            events = json.loads(
                kubevirt.kubectl.run(
                    "get",
                    "events",
                    "-n",
                    namespace,
                    "-o",
                    "json",
                    "--field-selector",
                    "reason=LauncherRefused",
                ).stdout
            )["items"]
            return events[0] if events else None

        event = kubevirt.wait_for("a LauncherRefused event on the VMI", warning, 60)
        assert event["involvedObject"]["name"] == "planted"
        assert "symlink" in event["message"]
    finally:
        (sockets / "launcher-sock").unlink()
        real.rename(sockets / "launcher-sock")


def test_a_launcher_that_dies_fails_its_vmi(kubevirt: Any, namespace: str) -> None:
    kubevirt.apply(kubevirt.vm("orphan", "Manual"), namespace)
    kubevirt.virtctl("start", "orphan", "-n", namespace)
    vmi = kubevirt.wait_running("orphan", namespace)
    found = subprocess.run(
        [
            "pgrep",
            "-f",
            # `virt-launcher` or `python3 -m virt_launcher`, whichever the pod runs.
            f"virt.launcher --name orphan --namespace {namespace} --uid {vmi['metadata']['uid']}",
        ],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.split()
    assert found, "no virt-launcher process for the VMI"
    os.kill(int(found[0]), signal.SIGKILL)
    kubevirt.wait_for(
        "the VMI to fail", lambda: kubevirt.phase("orphan", namespace) == "Failed", 120
    )
