"""The KubeVirt CR's configuration reaches rendering (useEmulation, ratios)."""

from __future__ import annotations

from virt_controller.config import ControllerConfig


def test_developer_configuration_is_read() -> None:
    cr = {
        "spec": {
            "configuration": {
                "developerConfiguration": {
                    "useEmulation": True,
                    "cpuAllocationRatio": 4,
                    "memoryOvercommit": 150,
                },
                "additionalGuestMemoryOverheadRatio": "1.5",
            }
        }
    }
    got = ControllerConfig(launcher_image="img:1").with_kubevirt(cr)
    assert got.launcher_image == "img:1"
    assert got.cluster.use_emulation is True
    assert got.cluster.cpu_allocation_ratio == 4
    assert got.cluster.memory_overcommit == 150
    assert got.cluster.additional_overhead_ratio == "1.5"


def test_missing_or_wrong_typed_values_keep_defaults() -> None:
    base = ControllerConfig()
    assert base.with_kubevirt(None) == base
    assert base.with_kubevirt({"spec": {}}) == base
    odd = {
        "spec": {
            "configuration": {
                "developerConfiguration": {"useEmulation": "yes", "cpuAllocationRatio": 0}
            }
        }
    }
    assert base.with_kubevirt(odd) == base
