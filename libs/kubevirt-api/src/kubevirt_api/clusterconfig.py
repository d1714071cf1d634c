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

from .values import as_bool, as_int, as_list, as_map, as_str

__all__ = ["ClusterConfig"]

_HOST_DEVICE_GROUPS = ("pciHostDevices", "mediatedDevices", "usb")


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

    def gate(self, name: str) -> bool:
        """Whether feature gate `name` is enabled."""
        return name in self.feature_gates

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
        )


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
