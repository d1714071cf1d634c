"""inferFromVolume on the control plane: virt-api's VM mutator reads the labels of the VM's
PVC (a Pending claim: no provisioner needed) and stores the inferred matchers, refuses a
VM whose PVC lacks them, and with inferFromVolumeFailurePolicy Ignore drops the matcher
(upstream's tests/instancetype "inferFromVolume" cases, PVC only: no CDI here)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

DEFAULTS = {
    "instancetype.kubevirt.io/default-instancetype": "u1.small",
    "instancetype.kubevirt.io/default-preference": "fedora",
    "instancetype.kubevirt.io/default-preference-kind": "VirtualMachineClusterPreference",
}


def pvc(name: str, labels: dict[str, str]) -> dict[str, Any]:
    # No storage class and no volume: the claim stays Pending, only its labels matter.
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "",
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }


def vm(name: str, claim: str, policy: str | None = None) -> dict[str, Any]:
    matcher: dict[str, Any] = {"inferFromVolume": "root"}
    if policy:
        matcher["inferFromVolumeFailurePolicy"] = policy
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": name},
        "spec": {
            "runStrategy": "Halted",
            "instancetype": dict(matcher),
            "preference": dict(matcher),
            "template": {
                "spec": {
                    "domain": {"devices": {}, "memory": {"guest": "512Mi"}},
                    "volumes": [{"name": "root", "persistentVolumeClaim": {"claimName": claim}}],
                }
            },
        },
    }


def test_the_matchers_come_from_the_pvcs_labels(
    virt_api: Any, apply: Callable[..., Any], namespace: str, get_json: Callable[..., Any]
) -> None:
    made = apply(pvc("labelled", DEFAULTS))
    assert made.returncode == 0, made.stderr
    # Ignore: the inferred instancetype sets the memory, the template's goes.
    admitted = apply(vm("inferred", "labelled", "Ignore"))
    assert admitted.returncode == 0, admitted.stderr
    stored = get_json("vm", "inferred", "-n", namespace)
    # No kind label: no kind (the cluster kind, as the matcher's default says).
    assert stored["spec"]["instancetype"] == {"name": "u1.small"}
    assert stored["spec"]["preference"] == {
        "name": "fedora",
        "kind": "VirtualMachineClusterPreference",
    }
    assert "memory" not in stored["spec"]["template"]["spec"]["domain"]


def test_a_pvc_without_the_labels_refuses_the_vm_unless_ignored(
    virt_api: Any, apply: Callable[..., Any], namespace: str, get_json: Callable[..., Any]
) -> None:
    made = apply(pvc("bare", {}))
    assert made.returncode == 0, made.stderr
    refused = apply(vm("strict", "bare"))
    assert refused.returncode != 0
    assert (
        "unable to find required instancetype.kubevirt.io/default-instancetype label on the volume"
        in refused.stderr
    )
    missing = apply(vm("nopvc", "no-such-claim", "Ignore"))
    assert missing.returncode != 0
    assert 'persistentvolumeclaims "no-such-claim" not found' in missing.stderr

    ignored = apply(vm("lenient", "bare", "Ignore"))
    assert ignored.returncode == 0, ignored.stderr
    spec = get_json("vm", "lenient", "-n", namespace)["spec"]
    assert "instancetype" not in spec
    assert "preference" not in spec
    assert spec["template"]["spec"]["domain"]["memory"] == {"guest": "512Mi"}
