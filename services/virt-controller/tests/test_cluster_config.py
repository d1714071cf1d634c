"""The KubeVirt CR's configuration reaches rendering (useEmulation, ratios)."""

from __future__ import annotations

from virt_controller.config import ClusterConfig, config_from_kubevirt


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
    got = config_from_kubevirt(ClusterConfig(), cr)
    assert got.use_emulation is True
    assert got.cpu_allocation_ratio == 4
    assert got.memory_overcommit == 150
    assert got.additional_overhead_ratio == "1.5"


def test_missing_or_wrong_typed_values_keep_defaults() -> None:
    base = ClusterConfig()
    assert config_from_kubevirt(base, None) == base
    assert config_from_kubevirt(base, {"spec": {}}) == base
    odd = {
        "spec": {
            "configuration": {
                "developerConfiguration": {"useEmulation": "yes", "cpuAllocationRatio": 0}
            }
        }
    }
    assert config_from_kubevirt(base, odd) == base
