"""Invalid manifests are refused through kubectl with every field path at once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest


def vmi(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "domain": {
            "devices": {"disks": [{"name": "root", "disk": {"bus": "virtio"}}]},
            "resources": {"requests": {"memory": "64Mi"}},
        },
        "volumes": [
            {
                "name": "root",
                "containerDisk": {"image": "quay.io/kubevirt/cirros-container-disk-demo"},
            }
        ],
    }
    base.update(spec)
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstance",
        "metadata": {"name": "bad"},
        "spec": base,
    }


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (
            vmi(
                hostname="Not_A_Label",
                domain={
                    "devices": {
                        "disks": [
                            {"name": "root", "cdrom": {"bus": "virtio"}},
                            {"name": "orphan", "disk": {}},
                        ]
                    },
                    "resources": {"requests": {"memory": "64Mi"}, "limits": {"memory": "32Mi"}},
                    "firmware": {"bootloader": {"bios": {}, "efi": {}}},
                },
            ),
            [
                "spec.hostname",
                "spec.domain.devices.disks[0].cdrom.bus",
                "spec.domain.devices.disks[1].name",
                "spec.domain.resources.requests.memory",
                "spec.domain.firmware.bootloader",
            ],
        ),
        (
            vmi(
                networks=[{"name": "a", "pod": {}}, {"name": "b", "pod": {}}],
                domain={
                    "devices": {
                        "disks": [{"name": "root", "disk": {}}],
                        "interfaces": [
                            {"name": "a", "masquerade": {}, "model": "vmxnet3"},
                            {"name": "b", "bridge": {}},
                        ],
                    },
                    "resources": {"requests": {"memory": "64Mi"}},
                },
            ),
            ["spec.networks[1].pod", "spec.domain.devices.interfaces[0].model"],
        ),
        (
            {
                "apiVersion": "kubevirt.io/v1",
                "kind": "VirtualMachine",
                "metadata": {"name": "bad"},
                "spec": {
                    "running": True,
                    "runStrategy": "Always",
                    "template": {"spec": vmi()["spec"]},
                },
            },
            ["spec.running", "mutually exclusive"],
        ),
        (
            {
                "apiVersion": "instancetype.kubevirt.io/v1beta1",
                "kind": "VirtualMachineInstancetype",
                "metadata": {"name": "bad"},
                "spec": {"cpu": {"guest": 0}, "memory": {"guest": "512k"}},
            },
            ["spec.cpu.guest", "spec.memory.guest"],
        ),
        (
            {
                "apiVersion": "kubevirt.io/v1",
                "kind": "VirtualMachineInstanceMigration",
                "metadata": {"name": "bad"},
                "spec": {"vmiName": "no-such-vmi"},
            },
            ["spec.vmiName", "does not exist"],
        ),
    ],
    ids=[
        "vmi-storage-compute",
        "vmi-network",
        "vm-running-and-runstrategy",
        "instancetype",
        "migration",
    ],
)
def test_invalid_manifest_is_refused_with_field_paths(
    virt_api: Any, apply: Callable[..., Any], obj: dict[str, Any], expected: list[str]
) -> None:
    result = apply(obj)
    assert result.returncode != 0
    assert "denied the request" in result.stderr or "is invalid" in result.stderr, result.stderr
    for text in expected:
        assert text in result.stderr, result.stderr


def test_vmi_spec_cannot_be_edited_by_a_user(
    virt_api: Any, kube: Any, namespace: str, apply: Callable[..., Any]
) -> None:
    ok = vmi()
    ok["metadata"]["name"] = "fixed"
    assert apply(ok).returncode == 0
    kube.kubectl.run(
        "create", "rolebinding", "alice-edit", "--clusterrole=edit", "--user=alice", "-n", namespace
    )
    result = kube.kubectl.run(
        "patch",
        "vmi",
        "fixed",
        "-n",
        namespace,
        "--as=alice",
        "--type=merge",
        "-p",
        '{"spec":{"hostname":"changed"}}',
        check=False,
    )
    assert result.returncode != 0
    assert "spec cannot be changed" in result.stderr, result.stderr
