"""virtctl start/stop/restart change the VM through the aggregated API (as upstream).

A virt-controller may be running against the same cluster and act on the requests at
once (create or delete the VMI), so where it could, either outcome is accepted.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from typing import Any

VMI_SPEC: dict[str, Any] = {
    "domain": {
        "devices": {"disks": [{"name": "root", "disk": {}}]},
        "resources": {"requests": {"memory": "64Mi"}},
    },
    "volumes": [
        {"name": "root", "containerDisk": {"image": "quay.io/kubevirt/cirros-container-disk-demo"}}
    ],
}


def vm(name: str, strategy: str) -> dict[str, Any]:
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": name},
        "spec": {"runStrategy": strategy, "template": {"spec": VMI_SPEC}},
    }


def test_start_and_stop_flip_the_run_strategy(
    virt_api: Any,
    kube: Any,
    namespace: str,
    apply: Callable[..., Any],
    virtctl: Callable[..., Any],
    get_json: Callable[..., Any],
) -> None:
    assert apply(vm("vm1", "Halted")).returncode == 0
    started = virtctl(kube.kubeconfig, "start", "vm1", "-n", namespace)
    assert started.returncode == 0, started.stderr
    assert "scheduled to start" in started.stdout
    assert get_json("vm", "vm1", "-n", namespace)["spec"]["runStrategy"] == "Always"

    again = virtctl(kube.kubeconfig, "start", "vm1", "-n", namespace)
    assert again.returncode == 1
    # "Always does not support manual start requests", or "already running" once a
    # controller has created the VMI.
    assert "(409 Conflict)" in again.stderr

    dry = virtctl(kube.kubeconfig, "stop", "vm1", "-n", namespace, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert get_json("vm", "vm1", "-n", namespace)["spec"]["runStrategy"] == "Always"

    stopped = virtctl(kube.kubeconfig, "stop", "vm1", "-n", namespace)
    assert stopped.returncode == 0, stopped.stderr
    assert get_json("vm", "vm1", "-n", namespace)["spec"]["runStrategy"] == "Halted"


class VmWatch:
    """`kubectl get vm NAME -w -o json`: every version of the VM the API server stored.

    A running controller may consume state change requests at once; watching shows they
    were written even when they are gone by the time we could GET the VM.
    """

    def __init__(self, kube: Any, namespace: str, name: str) -> None:
        self.proc = subprocess.Popen(
            [
                str(kube.kubectl.binary),
                f"--kubeconfig={kube.kubeconfig}",
                "get",
                "vm",
                name,
                "-n",
                namespace,
                "-w",
                "-o",
                "json",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.versions: list[dict[str, Any]] = []
        self._decoder = json.JSONDecoder()
        self._buffer = ""
        os.set_blocking(self.proc.stdout.fileno(), False)  # type: ignore[union-attr]

    def poll(self) -> list[dict[str, Any]]:
        chunk = self.proc.stdout.read() if self.proc.stdout else None  # type: ignore[union-attr]
        if chunk:
            self._buffer += chunk.decode()
        while self._buffer.strip():
            try:
                obj, end = self._decoder.raw_decode(self._buffer.lstrip())
            except ValueError:
                break
            self.versions.append(obj)
            self._buffer = self._buffer.lstrip()[end:]
        return self.versions

    def saw_requests(self, expected: list[dict[str, Any]]) -> bool:
        return any(v.get("status", {}).get("stateChangeRequests") == expected for v in self.poll())

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


def test_manual_start_and_restart_use_state_change_requests(
    virt_api: Any,
    kube: Any,
    namespace: str,
    apply: Callable[..., Any],
    virtctl: Callable[..., Any],
    wait_for: Callable[..., Any],
) -> None:
    assert apply(vm("vm2", "Manual")).returncode == 0
    watch = VmWatch(kube, namespace, "vm2")
    try:
        wait_for(watch.poll, what="the watch to show vm2")
        assert virtctl(kube.kubeconfig, "start", "vm2", "-n", namespace).returncode == 0
        wait_for(lambda: watch.saw_requests([{"action": "Start"}]), what="a Start request on vm2")
    finally:
        watch.close()

    assert apply(vm("vm3", "Manual")).returncode == 0
    restart_without_vmi = virtctl(kube.kubeconfig, "restart", "vm3", "-n", namespace)
    assert restart_without_vmi.returncode == 1
    assert "VM is not running" in restart_without_vmi.stderr
    vmi = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstance",
        "metadata": {"name": "vm3"},
        "spec": VMI_SPEC,
    }
    assert apply(vmi).returncode == 0
    uid = json.loads(kube.kubectl.run("get", "vmi", "vm3", "-n", namespace, "-o", "json").stdout)[
        "metadata"
    ]["uid"]
    watch = VmWatch(kube, namespace, "vm3")
    try:
        wait_for(watch.poll, what="the watch to show vm3")
        restarted = virtctl(kube.kubeconfig, "restart", "vm3", "-n", namespace)
        assert restarted.returncode == 0, restarted.stderr
        expected = [{"action": "Stop", "uid": uid}, {"action": "Start"}]
        wait_for(lambda: watch.saw_requests(expected), what="Stop(uid)+Start requests on vm3")
    finally:
        watch.close()
