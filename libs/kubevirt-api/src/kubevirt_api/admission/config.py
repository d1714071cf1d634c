"""The cluster configuration admission depends on, read from the KubeVirt CR."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .values import as_list, as_map, as_str

__all__ = ["ClusterConfig"]


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    """Feature gates and the few settings rules consult; the default is a stock install."""

    feature_gates: frozenset[str] = field(default_factory=frozenset)
    use_emulation: bool = False
    permitted_host_devices: frozenset[str] = field(default_factory=frozenset)
    permit_bridge_on_pod_network: bool = True

    def gate(self, name: str) -> bool:
        """Whether feature gate `name` is enabled."""
        return name in self.feature_gates

    @classmethod
    def from_kubevirt(cls, kubevirt: Mapping[str, Any] | None) -> ClusterConfig:
        """Read `spec.configuration` of a KubeVirt CR (None: no CR, stock defaults)."""
        configuration = as_map(as_map(as_map(kubevirt).get("spec")).get("configuration"))
        developer = as_map(configuration.get("developerConfiguration"))
        gates = frozenset(g for g in map(as_str, as_list(developer.get("featureGates"))) if g)
        permitted = as_map(configuration.get("permittedHostDevices"))
        names: set[str] = set()
        for group in ("pciHostDevices", "mediatedDevices", "usb"):
            for device in as_list(permitted.get(group)):
                name = as_str(as_map(device).get("resourceName"))
                if name:
                    names.add(name)
        network = as_map(configuration.get("network"))
        return cls(
            permit_bridge_on_pod_network=network.get("permitBridgeInterfaceOnPodNetwork")
            is not False,
            feature_gates=gates,
            use_emulation=developer.get("useEmulation") is True,
            permitted_host_devices=frozenset(names),
        )
