"""The apiserver itself refuses a VirtualMachineInstance whose fields have the wrong type."""

from __future__ import annotations

import copy
import json
from typing import Any

from kv_cluster import Kubectl

VMI: dict[str, Any] = {
    "apiVersion": "kubevirt.io/v1",
    "kind": "VirtualMachineInstance",
    "metadata": {"name": "typed"},
    "spec": {
        "domain": {
            "cpu": {"cores": 2},
            "devices": {},
            "resources": {"requests": {"memory": "64Mi"}},
        }
    },
}


def _create(kubectl: Kubectl, namespace: str, obj: dict[str, Any], *flags: str) -> Any:
    return kubectl.run(
        "create",
        "-n",
        namespace,
        "--dry-run=server",
        *flags,
        "-f",
        "-",
        stdin=json.dumps(obj),
        check=False,
    )


def test_a_well_typed_vmi_is_accepted(kube: Any, kubectl: Kubectl, namespace: str) -> None:
    kube.require_crds()
    out = _create(kubectl, namespace, VMI)
    assert out.returncode == 0, out.stderr


def test_a_string_where_an_integer_belongs_is_refused_with_its_path(
    kube: Any, kubectl: Kubectl, namespace: str
) -> None:
    kube.require_crds()
    bad = copy.deepcopy(VMI)
    bad["spec"]["domain"]["cpu"]["cores"] = "four"
    # --validate=false: kubectl sends it as is, so the refusal comes from the server's schema.
    out = _create(kubectl, namespace, bad, "--validate=false")
    assert out.returncode != 0
    assert "spec.domain.cpu.cores" in out.stderr
    assert "must be of type integer" in out.stderr


def test_an_object_where_a_list_belongs_is_refused(
    kube: Any, kubectl: Kubectl, namespace: str
) -> None:
    kube.require_crds()
    bad = copy.deepcopy(VMI)
    bad["spec"]["domain"]["devices"]["disks"] = {"name": "root"}
    out = _create(kubectl, namespace, bad, "--validate=false")
    assert out.returncode != 0
    assert "spec.domain.devices.disks" in out.stderr
    assert "must be of type array" in out.stderr


def test_an_unknown_field_is_refused_under_strict_validation(
    kube: Any, kubectl: Kubectl, namespace: str
) -> None:
    kube.require_crds()
    bad = copy.deepcopy(VMI)
    bad["spec"]["domain"]["cpu"]["coresPerSocket"] = 2
    out = _create(kubectl, namespace, bad, "--validate=strict")
    assert out.returncode != 0
    assert 'unknown field "spec.domain.cpu.coresPerSocket"' in out.stderr
