"""What `kubectl describe` shows on the real cluster: upstream's Events, conditions and
printableStatus, for a VM whose image does not exist and for one that runs."""

from __future__ import annotations

import json
from typing import Any

MISSING_IMAGE = "kubevirt-py/guest-containerdisk:does-not-exist"


def _printable(kubevirt: Any, name: str, namespace: str) -> str:
    vm = kubevirt.get("vm", name, namespace) or {}
    return str((vm.get("status") or {}).get("printableStatus") or "")


def _events(kubevirt: Any, kind: str, name: str, namespace: str) -> set[tuple[str, str, str]]:
    listed = kubevirt.kubectl.run(
        "get",
        "events",
        "-n",
        namespace,
        f"--field-selector=involvedObject.kind={kind},involvedObject.name={name}",
        "-o",
        "json",
    )
    return {(e["type"], e["reason"], e["message"]) for e in json.loads(listed.stdout)["items"]}


def test_a_vm_whose_image_does_not_exist_shows_err_image_pull_and_upstreams_events(
    kubevirt: Any, namespace: str
) -> None:
    manifest = kubevirt.vm("nosuchimage", containerdisk=True)
    volume = manifest["spec"]["template"]["spec"]["volumes"][0]["containerDisk"]
    volume.update(image=MISSING_IMAGE, imagePullPolicy="IfNotPresent")
    kubevirt.apply(manifest, namespace)

    status = kubevirt.wait_for(
        "printableStatus ErrImagePull or ImagePullBackOff",
        lambda: (
            s
            if (s := _printable(kubevirt, "nosuchimage", namespace))
            in ("ErrImagePull", "ImagePullBackOff")
            else None
        ),
        120,
    )
    vm = kubevirt.get("vm", "nosuchimage", namespace)
    assert vm is not None
    conditions = {c["type"]: c for c in vm["status"]["conditions"]}
    assert conditions["Synchronized"]["status"] == "False"
    assert conditions["Synchronized"]["reason"] == status
    assert MISSING_IMAGE in conditions["Synchronized"].get("message", "")
    assert (conditions["Ready"]["status"], conditions["Ready"]["reason"]) == (
        "False",
        "GuestNotRunning",
    )

    described = kubevirt.kubectl.run("describe", "vm", "nosuchimage", "-n", namespace).stdout
    assert "Events:" in described
    assert "SuccessfulCreate" in described
    assert "Started the virtual machine by creating the new virtual machine instance" in described
    assert status in described  # printableStatus and the Synchronized reason
    vmi_events = _events(kubevirt, "VirtualMachineInstance", "nosuchimage", namespace)
    assert any(
        reason == "SuccessfulCreate" and message.startswith("Created virtual machine pod ")
        for _, reason, message in vmi_events
    ), vmi_events

    stopped = kubevirt.virtctl("stop", "nosuchimage", "-n", namespace)
    assert stopped.returncode == 0, stopped.stderr
    kubevirt.wait_for(
        "printableStatus Stopped",
        lambda: _printable(kubevirt, "nosuchimage", namespace) == "Stopped",
        120,
    )
    vm_events = _events(kubevirt, "VirtualMachine", "nosuchimage", namespace)
    assert any(reason == "SuccessfulDelete" for _, reason, _ in vm_events), vm_events


def test_a_running_vm_shows_the_handlers_events_and_the_pods_readiness(
    kubevirt: Any, namespace: str
) -> None:
    kubevirt.apply(kubevirt.vm("described"), namespace)
    kubevirt.wait_running("described", namespace)

    def ready() -> dict[str, Any] | None:
        vm = kubevirt.get("vm", "described", namespace) or {}
        status = vm.get("status") or {}
        found = [c for c in status.get("conditions") or () if c["type"] == "Ready"]
        return found[0] if found and found[0]["status"] == "True" else None

    kubevirt.wait_for("the VM Ready (copied from the VMI, mirrored from the pod)", ready, 60)
    assert _printable(kubevirt, "described", namespace) == "Running"
    kubevirt.wait_for(
        "virt-handler's Created and Started events",
        lambda: (
            {
                ("Normal", "Created", "VirtualMachineInstance defined."),
                ("Normal", "Started", "VirtualMachineInstance started."),
            }
            <= _events(kubevirt, "VirtualMachineInstance", "described", namespace)
        ),
        30,
    )
    vm = kubevirt.get("vm", "described", namespace)
    assert vm is not None
    kinds = {c["type"] for c in vm["status"]["conditions"]}
    assert "LiveMigratable" in kinds  # the VMI's conditions are copied to the VM

    stopped = kubevirt.virtctl("stop", "described", "-n", namespace)
    assert stopped.returncode == 0, stopped.stderr
    kubevirt.wait_for(
        "virt-handler's Stopped event",
        lambda: any(
            reason in ("Stopped", "Deleted", "ShuttingDown")
            for _, reason, _ in _events(kubevirt, "VirtualMachineInstance", "described", namespace)
        ),
        120,
    )
