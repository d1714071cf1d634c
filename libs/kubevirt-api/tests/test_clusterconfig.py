"""The KubeVirt CR's configuration, read once for admission, virt-controller and virt-handler."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from kubevirt_api import ClusterConfig
from kubevirt_api.migrations import eviction_strategy, migratable_on_eviction


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
    assert stock.common_instancetypes_deployment is True


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
                "commonInstancetypesDeployment": {"enabled": False},
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
    assert config.common_instancetypes_deployment is False


def _read_only(value: Any) -> Any:
    """As an informer keeps an object: objects read-only mappings, arrays tuples."""
    if isinstance(value, dict):
        return MappingProxyType({k: _read_only(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(_read_only(v) for v in value)
    return value


def test_an_informer_s_read_only_copy_reads_the_same() -> None:
    cr = _cr(
        {
            "developerConfiguration": {"featureGates": ["ImageVolume"], "useEmulation": True},
            "permittedHostDevices": {"usb": [{"resourceName": "kubevirt.io/storage"}]},
        }
    )
    frozen = ClusterConfig.from_kubevirt(_read_only(cr))
    assert frozen == ClusterConfig.from_kubevirt(cr)
    assert frozen.gate("ImageVolume")
    assert frozen.permitted_host_devices == {"kubevirt.io/storage"}


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
                "commonInstancetypesDeployment": {"enabled": "false"},
            }
        )
    )
    assert config == ClusterConfig(feature_gates=frozenset({"Snapshot"}))


def test_a_cr_of_the_wrong_shape_reads_as_stock() -> None:
    assert ClusterConfig.from_kubevirt({"spec": "nonsense"}) == ClusterConfig()
    assert ClusterConfig.from_kubevirt({"spec": {"configuration": []}}) == ClusterConfig()


def test_log_verbosity_per_component_and_out_of_range_reads_as_unset() -> None:
    config = ClusterConfig.from_kubevirt(
        {
            "spec": {
                "configuration": {
                    "developerConfiguration": {
                        "logVerbosity": {"virtHandler": 6, "virtAPI": 12, "virtController": "3"}
                    }
                }
            }
        }
    )
    assert config.verbosity("virt-handler") == 6
    assert config.verbosity("virt-api") is None
    assert config.verbosity("virt-launcher") is None
    assert ClusterConfig().verbosity("virt-handler") is None


def test_migrations_take_the_crs_fields_over_upstreams_defaults() -> None:
    stock = ClusterConfig().migrations
    assert (stock.parallel_migrations_per_cluster, stock.parallel_outbound_migrations_per_node) == (
        5,
        2,
    )
    assert (stock.progress_timeout, stock.completion_timeout_per_gi_b) == (150, 150)
    assert str(stock.bandwidth_per_migration) == "0Mi"
    assert stock.node_drain_taint_key == "kubevirt.io/drain"
    assert stock.allow_workload_disruption is False
    config = ClusterConfig.from_kubevirt(
        _cr({"migrations": {"parallelMigrationsPerCluster": 1, "progressTimeout": "slow",
                            "allowPostCopy": True}, "evictionStrategy": "LiveMigrate"})
    )  # fmt: skip
    assert config.migrations.parallel_migrations_per_cluster == 1
    assert config.migrations.progress_timeout == 150  # a wrong type reads as unset
    assert config.migrations.allow_workload_disruption is True  # follows allowPostCopy
    assert config.eviction_strategy == "LiveMigrate"
    assert ClusterConfig().eviction_strategy is None


def test_eviction_strategy_of_a_vmi_wins_over_the_clusters() -> None:
    cluster = ClusterConfig.from_kubevirt(_cr({"evictionStrategy": "LiveMigrate"}))
    migratable = {"status": {"conditions": ({"type": "LiveMigratable", "status": "True"},)}}
    assert eviction_strategy({"spec": {"evictionStrategy": "None"}}, cluster) == "None"
    assert migratable_on_eviction({"spec": {}}, cluster) is True
    if_possible = {"spec": {"evictionStrategy": "LiveMigrateIfPossible"}}
    assert migratable_on_eviction(if_possible, cluster) is False
    assert migratable_on_eviction({**if_possible, **migratable}, cluster) is True
