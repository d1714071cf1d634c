"""The cluster configuration, read from the KubeVirt CR: the one reader every service uses.

Admission (virt-api, ``virtctl validate``), virt-controller and virt-handler all read the
CR through :meth:`ClusterConfig.from_kubevirt`. A value of the wrong type or out of range
reads as unset, so the stock default holds (a CR the apiserver admitted is always
well-typed; a file given to ``virtctl validate`` need not be).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .codec import load
from .errors import InvalidObjectError
from .models import MigrationConfiguration
from .values import as_bool, as_int, as_list, as_map, as_str

__all__ = ["DEFAULT_MIGRATIONS", "VERBOSITY_FIELDS", "ClusterConfig"]

#: logVerbosity's field for each component (as `virtctl adm log-verbosity` names them).
VERBOSITY_FIELDS: Mapping[str, str] = {
    "virt-api": "virtAPI",
    "virt-controller": "virtController",
    "virt-handler": "virtHandler",
    "virt-launcher": "virtLauncher",
    "virt-operator": "virtOperator",
}

_HOST_DEVICE_GROUPS = ("pciHostDevices", "mediatedDevices", "usb")
# Upstream's stock spec.configuration.migrations (pkg/virt-config); the CR's fields go over it.
_MIGRATION_DEFAULTS: dict[str, Any] = {
    "parallelMigrationsPerCluster": 5,
    "parallelOutboundMigrationsPerNode": 2,
    "nodeDrainTaintKey": "kubevirt.io/drain",
    "bandwidthPerMigration": "0Mi",
    "progressTimeout": 150,
    "completionTimeoutPerGiB": 150,
    "maxDowntimeMs": 900,
    "utilityVolumesTimeout": 150,
    "unsafeMigrationOverride": False,
    "allowAutoConverge": False,
    "allowPostCopy": False,
}


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    """What the services take from ``spec.configuration``; the default is a stock install."""

    #: developerConfiguration.featureGates.
    feature_gates: frozenset[str] = field(default_factory=frozenset)
    #: developerConfiguration.useEmulation: TCG guests, no devices.kubevirt.io/kvm request.
    use_emulation: bool = False
    #: resourceName of every permittedHostDevices entry (PCI, mediated, USB).
    permitted_host_devices: frozenset[str] = field(default_factory=frozenset)
    #: network.permitBridgeInterfaceOnPodNetwork (only an explicit false forbids it).
    permit_bridge_on_pod_network: bool = True
    #: developerConfiguration.cpuAllocationRatio: vCPUs per requested CPU (positive).
    cpu_allocation_ratio: int = 10
    #: developerConfiguration.memoryOvercommit, in percent (positive).
    memory_overcommit: int = 100
    #: additionalGuestMemoryOverheadRatio (a decimal string, e.g. "1.5").
    additional_overhead_ratio: str | None = None
    #: developerConfiguration.logVerbosity: 0-9 per component, by upstream's field names
    #: (virtAPI, virtController, virtHandler, virtLauncher, virtOperator); unset: absent.
    log_verbosity: Mapping[str, int] = field(default_factory=dict)
    #: migrations: upstream's defaults with the CR's fields over them, one field at a time.
    migrations: MigrationConfiguration = field(default_factory=lambda: DEFAULT_MIGRATIONS)
    #: evictionStrategy, cluster-wide (a VMI's own spec.evictionStrategy wins).
    eviction_strategy: str | None = None
    #: commonInstancetypesDeployment.enabled: install the common instancetypes and
    #: preferences (only an explicit false opts out).
    common_instancetypes_deployment: bool = True
    #: vmStateStorageClass: the StorageClass of VMs' backend storage (persistent EFI/TPM
    #: state); None: the cluster's default.
    vm_state_storage_class: str | None = None

    def gate(self, name: str) -> bool:
        """Whether feature gate `name` is enabled."""
        return name in self.feature_gates

    def verbosity(self, component: str) -> int | None:
        """The log verbosity the CR sets for `component` ("virt-handler"...), None if unset."""
        return self.log_verbosity.get(VERBOSITY_FIELDS.get(component, ""))

    @classmethod
    def from_kubevirt(cls, kubevirt: Mapping[str, Any] | None) -> ClusterConfig:
        """Read a KubeVirt CR's ``spec.configuration`` (None: no CR, stock defaults)."""
        configuration = as_map(as_map(as_map(kubevirt).get("spec")).get("configuration"))
        developer = as_map(configuration.get("developerConfiguration"))
        stock = cls()
        return cls(
            feature_gates=frozenset(
                g for g in map(as_str, as_list(developer.get("featureGates"))) if g
            ),
            use_emulation=developer.get("useEmulation") is True,
            permitted_host_devices=_permitted_host_devices(
                as_map(configuration.get("permittedHostDevices"))
            ),
            permit_bridge_on_pod_network=as_bool(
                as_map(configuration.get("network")).get("permitBridgeInterfaceOnPodNetwork")
            )
            is not False,
            cpu_allocation_ratio=_positive(developer.get("cpuAllocationRatio"))
            or stock.cpu_allocation_ratio,
            memory_overcommit=_positive(developer.get("memoryOvercommit"))
            or stock.memory_overcommit,
            additional_overhead_ratio=as_str(
                configuration.get("additionalGuestMemoryOverheadRatio")
            )
            or None,
            log_verbosity=_log_verbosity(as_map(developer.get("logVerbosity"))),
            migrations=_migrations(as_map(configuration.get("migrations"))),
            eviction_strategy=as_str(configuration.get("evictionStrategy")) or None,
            common_instancetypes_deployment=as_bool(
                as_map(configuration.get("commonInstancetypesDeployment")).get("enabled")
            )
            is not False,
            vm_state_storage_class=as_str(configuration.get("vmStateStorageClass")) or None,
        )


def _log_verbosity(given: Mapping[str, Any]) -> dict[str, int]:
    levels = ((name, as_int(given.get(name))) for name in VERBOSITY_FIELDS.values())
    return {name: level for name, level in levels if level is not None and 0 <= level <= 9}


def _permitted_host_devices(permitted: Mapping[str, Any]) -> frozenset[str]:
    names = (
        as_str(as_map(device).get("resourceName"))
        for group in _HOST_DEVICE_GROUPS
        for device in as_list(permitted.get(group))
    )
    return frozenset(name for name in names if name)


def _positive(value: object) -> int | None:
    number = as_int(value)
    return number if number is not None and number > 0 else None


def _migrations(overrides: Mapping[str, Any]) -> MigrationConfiguration:
    merged = dict(_MIGRATION_DEFAULTS)
    for key, value in overrides.items():
        try:
            load(MigrationConfiguration, {key: value})
        except InvalidObjectError:
            continue  # a wrong type reads as unset: the default holds
        merged[key] = value
    if merged.get("allowWorkloadDisruption") is None:
        # As upstream's GetMigrationConfiguration: it follows allowPostCopy when unset.
        merged["allowWorkloadDisruption"] = merged.get("allowPostCopy") is True
    return load(MigrationConfiguration, merged)


#: spec.configuration.migrations of a stock install.
DEFAULT_MIGRATIONS: MigrationConfiguration = _migrations({})
