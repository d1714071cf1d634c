"""Fixtures for the admission rule tests: a valid VMI that each test breaks one way."""

from __future__ import annotations

import copy
from typing import Any

import pytest

_VMI: dict[str, Any] = {
    "apiVersion": "kubevirt.io/v1",
    "kind": "VirtualMachineInstance",
    "metadata": {"name": "testvmi", "namespace": "default"},
    "spec": {
        "domain": {
            "devices": {
                "disks": [{"name": "root", "disk": {"bus": "virtio"}}],
                "interfaces": [{"name": "default", "masquerade": {}}],
            },
            "resources": {"requests": {"memory": "128Mi"}},
        },
        "networks": [{"name": "default", "pod": {}}],
        "volumes": [{"name": "root", "containerDisk": {"image": "quay.io/kubevirt/cirros"}}],
    },
}


@pytest.fixture
def vmi() -> dict[str, Any]:
    """A fresh valid VMI (deep copy: tests mutate it)."""
    return copy.deepcopy(_VMI)


@pytest.fixture
def vm(vmi: dict[str, Any]) -> dict[str, Any]:
    """A valid VM whose template is the VMI fixture."""
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": "testvm"},
        "spec": {"runStrategy": "Halted", "template": {"metadata": {}, "spec": vmi["spec"]}},
    }
