"""virtctl start/stop/restart change the VM through the aggregated API (as upstream).

A virt-controller may be running against the same cluster and act on the requests at
once (create or delete the VMI), so where it could, either outcome is accepted.
"""

from __future__ import annotations

import json
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


def test_manual_start_and_restart_use_state_change_requests(
    virt_api: Any,
    kube: Any,
    namespace: str,
    apply: Callable[..., Any],
    virtctl: Callable[..., Any],
    get_json: Callable[..., Any],
    wait_for: Callable[..., Any],
) -> None:
    def vmi_uid(name: str) -> str | None:
        found = kube.kubectl.run("get", "vmi", name, "-n", namespace, "-o", "json", check=False)
        return json.loads(found.stdout)["metadata"]["uid"] if found.returncode == 0 else None

    assert apply(vm("vm2", "Manual")).returncode == 0
    assert virtctl(kube.kubeconfig, "start", "vm2", "-n", namespace).returncode == 0
    # Our Start request, unless a controller already consumed it and created the VMI.
    wait_for(
        lambda: (
            get_json("vm", "vm2", "-n", namespace).get("status", {}).get("stateChangeRequests")
            == [{"action": "Start"}]
            or vmi_uid("vm2")
        ),
        what="the Start request (or the VMI it asked for)",
    )

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
    uid = vmi_uid("vm3")
    restarted = virtctl(kube.kubeconfig, "restart", "vm3", "-n", namespace)
    assert restarted.returncode == 0, restarted.stderr
    # Stop(this VMI) then Start, unless a controller already replaced the VMI.
    wait_for(
        lambda: (
            get_json("vm", "vm3", "-n", namespace).get("status", {}).get("stateChangeRequests")
            == [{"action": "Stop", "uid": uid}, {"action": "Start"}]
            or vmi_uid("vm3") != uid
        ),
        what="Stop+Start requests (or the VMI replaced)",
    )
