"""Every upstream example of our kinds passes the rules once defaulted (as through the webhooks)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from kubevirt_api.admission import ADMITTED_KINDS, ClusterConfig, validate_object
from kubevirt_api.defaults import DefaultsConfig, vm_defaults, vmi_defaults

EXAMPLES = Path(__file__).resolve().parents[4] / "compat" / "upstream-kubevirt" / "examples"
GATED = ClusterConfig.from_kubevirt(
    {
        "spec": {
            "configuration": {
                "developerConfiguration": {
                    "featureGates": ["HostDisk", "Sidecar", "GPU", "HostDevices"]
                },
                "permittedHostDevices": {
                    "pciHostDevices": [{"resourceName": "nvidia.com/GP102GL_Tesla_P40"}],
                    "usb": [{"resourceName": "kubevirt.io/storage"}],
                },
            }
        }
    }
)


def documents() -> list[Any]:
    found = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict):
                key = (doc.get("apiVersion", "").rpartition("/")[0], doc.get("kind"))
                if key in ADMITTED_KINDS:
                    found.append(pytest.param(doc, id=f"{path.name}:{doc['kind']}"))
    return found


@pytest.mark.parametrize("doc", documents())
def test_example_is_admitted_after_defaulting(doc: dict[str, Any]) -> None:
    if doc["kind"] == "VirtualMachineInstance":
        doc = vmi_defaults(doc, DefaultsConfig())
    elif doc["kind"] == "VirtualMachine":
        doc = vm_defaults(doc, DefaultsConfig(), create=True)
    assert [str(c) for c in validate_object(doc, GATED)] == []


def test_gated_examples_name_their_gate_without_it() -> None:
    host_disk = next(
        d for d in (p.values[0] for p in documents()) if d["metadata"]["name"] == "vmi-host-disk"
    )
    causes = validate_object(vmi_defaults(host_disk, DefaultsConfig()), ClusterConfig())
    assert [c.field for c in causes] == ["spec.volumes[0].hostDisk"]
    assert "HostDisk feature gate" in causes[0].message
