"""The KubeVirt CR's configuration, read once for admission, virt-controller and virt-handler."""

from __future__ import annotations

from typing import Any

from kubevirt_api import ClusterConfig


def _cr(configuration: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "KubeVirt",
        "spec": {"configuration": configuration},
    }


def test_no_cr_is_a_stock_install() -> None:
    stock = ClusterConfig.from_kubevirt(None)
    assert stock == ClusterConfig()
    assert stock.feature_gates == frozenset()
    assert stock.use_emulation is False
    assert stock.permit_bridge_on_pod_network is True
    assert stock.cpu_allocation_ratio == 10
    assert stock.memory_overcommit == 100
    assert stock.additional_overhead_ratio is None


def test_every_setting_is_read() -> None:
    config = ClusterConfig.from_kubevirt(
        _cr(
            {
                "developerConfiguration": {
                    "featureGates": ["Snapshot", "HostDevices"],
                    "useEmulation": True,
                    "cpuAllocationRatio": 4,
                    "memoryOvercommit": 150,
                },
                "permittedHostDevices": {
                    "pciHostDevices": [
                        {"resourceName": "nvidia.com/P40", "pciVendorSelector": "x"}
                    ],
                    "mediatedDevices": [{"resourceName": "nvidia.com/GRID"}],
                    "usb": [{"resourceName": "kubevirt.io/storage"}],
                },
                "network": {"permitBridgeInterfaceOnPodNetwork": False},
                "additionalGuestMemoryOverheadRatio": "1.5",
            }
        )
    )
    assert config.gate("Snapshot")
    assert config.gate("HostDevices")
    assert not config.gate("Other")
    assert config.use_emulation is True
    assert config.permitted_host_devices == {
        "nvidia.com/P40",
        "nvidia.com/GRID",
        "kubevirt.io/storage",
    }
    assert config.permit_bridge_on_pod_network is False
    assert config.cpu_allocation_ratio == 4
    assert config.memory_overcommit == 150
    assert config.additional_overhead_ratio == "1.5"


def test_wrong_types_and_out_of_range_values_read_as_unset() -> None:
    config = ClusterConfig.from_kubevirt(
        _cr(
            {
                "developerConfiguration": {
                    "featureGates": ["Snapshot", 3, ""],
                    "useEmulation": "yes",
                    "cpuAllocationRatio": 0,
                    "memoryOvercommit": True,
                },
                "permittedHostDevices": {"usb": ["not-an-object", {"resourceName": 7}]},
                "network": {"permitBridgeInterfaceOnPodNetwork": "no"},
                "additionalGuestMemoryOverheadRatio": 1.5,
            }
        )
    )
    assert config == ClusterConfig(feature_gates=frozenset({"Snapshot"}))


def test_a_cr_of_the_wrong_shape_reads_as_stock() -> None:
    assert ClusterConfig.from_kubevirt({"spec": "nonsense"}) == ClusterConfig()
    assert ClusterConfig.from_kubevirt({"spec": {"configuration": []}}) == ClusterConfig()
