"""virtctl start/stop/restart change the VM through the aggregated API (as upstream)."""

from __future__ import annotations

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
    assert "Always does not support manual start requests (409 Conflict)" in again.stderr

    dry = virtctl(kube.kubeconfig, "stop", "vm1", "-n", namespace, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert get_json("vm", "vm1", "-n", namespace)["spec"]["runStrategy"] == "Always"

    stopped = virtctl(kube.kubeconfig, "stop", "vm1", "-n", namespace)
    assert stopped.returncode == 0, stopped.stderr
    assert get_json("vm", "vm1", "-n", namespace)["spec"]["runStrategy"] == "Halted"


def test_manual_start_and_restart_use_state_change_requests(
    virt_api: Any,
    kube: Any,
    namespace: str,
    apply: Callable[..., Any],
    virtctl: Callable[..., Any],
    get_json: Callable[..., Any],
) -> None:
    assert apply(vm("vm2", "Manual")).returncode == 0
    assert virtctl(kube.kubeconfig, "start", "vm2", "-n", namespace).returncode == 0
    assert get_json("vm", "vm2", "-n", namespace)["status"]["stateChangeRequests"] == [
        {"action": "Start"}
    ]

    # restart needs a VMI to stop; stand one in for the controller (not built here).
    assert apply(vm("vm3", "Always")).returncode == 0
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
    uid = get_json("vmi", "vm3", "-n", namespace)["metadata"]["uid"]
    restarted = virtctl(kube.kubeconfig, "restart", "vm3", "-n", namespace)
    assert restarted.returncode == 0, restarted.stderr
    requests = get_json("vm", "vm3", "-n", namespace)["status"]["stateChangeRequests"]
    assert requests == [{"action": "Stop", "uid": uid}, {"action": "Start"}]
