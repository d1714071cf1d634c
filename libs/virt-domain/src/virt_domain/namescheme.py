"""The names of a VMI network's links in the launcher pod, as upstream KubeVirt gives them.

One rule read by everyone who names a link: virt-controller (the pod interface Multus
is asked for, in the `k8s.v1.cni.cncf.io/networks` annotation), virt-handler (the links
it makes in the pod's netns) and the converter (the tap the domain's `<interface>`
uses). Upstream: `pkg/network/namescheme` and `pkg/network/link/names.go`.

- The primary network (the pod network, or the Multus network marked `default`) is the
  pod's `eth0`, its tap is `tap0`, its bridge `k6t-eth0`.
- A secondary Multus network's pod interface is `pod` + the first 11 hex digits of the
  SHA-256 of the network's name (upstream's hashed scheme, what it asks for on every new
  pod); its tap is `tap<hash>`, its bridge `k6t-<hash>`, its renamed NIC `<hash>-nic`.

Pure: no I/O.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kubevirt_api.models import Network

__all__ = [
    "PRIMARY_POD_INTERFACE",
    "PRIMARY_TAP",
    "PodLinks",
    "bridge_name",
    "hashed_pod_interface_name",
    "is_primary",
    "is_secondary_multus",
    "nic_name",
    "pod_interface_names",
    "pod_links",
    "tap_name",
]

PRIMARY_POD_INTERFACE = "eth0"
PRIMARY_TAP = "tap0"
_HASHED_PREFIX = "pod"
# 15 (the kernel's link name limit) minus len("-nic"), the renamed NIC's suffix.
_HASH_LENGTH = 11


def is_secondary_multus(network: Network) -> bool:
    """A Multus network that is not the pod's default network."""
    return network.multus is not None and not network.multus.default


def is_primary(network: Network) -> bool:
    """The pod network, or the Multus network that replaces it (`multus.default: true`)."""
    return network.pod is not None or (network.multus is not None and bool(network.multus.default))


def hashed_pod_interface_name(network_name: str) -> str:
    """`pod<11 hex digits of sha256(network name)>`, e.g. `blue` -> `pod16477688c0e`."""
    digest = hashlib.sha256(network_name.encode()).hexdigest()
    return f"{_HASHED_PREFIX}{digest[:_HASH_LENGTH]}"


def pod_interface_names(networks: Iterable[Network]) -> dict[str, str]:
    """Network name -> its interface in the pod, for the primary and Multus networks."""
    names: dict[str, str] = {}
    for network in networks:
        if is_secondary_multus(network):
            names[network.name] = hashed_pod_interface_name(network.name)
        elif is_primary(network) and PRIMARY_POD_INTERFACE not in names.values():
            names[network.name] = PRIMARY_POD_INTERFACE
    return names


def tap_name(pod_interface: str, network: Network) -> str:
    """The tap of a network: `tap0` for the primary one, `tap<hash>` for a secondary one."""
    if is_secondary_multus(network):
        return "tap" + pod_interface[len(_HASHED_PREFIX) :]
    return PRIMARY_TAP


def bridge_name(pod_interface: str) -> str:
    """The in-pod bridge holding the tap: `k6t-eth0`, `k6t-<hash>`."""
    return "k6t-" + pod_interface.removeprefix(_HASHED_PREFIX)


def nic_name(pod_interface: str) -> str:
    """The pod interface renamed when bridge binding moves its MAC to the bridge."""
    return pod_interface.removeprefix(_HASHED_PREFIX) + "-nic"


@dataclass(frozen=True, slots=True)
class PodLinks:
    """One network's links in the launcher pod."""

    #: The interface CNI (or Multus) put in the pod: `eth0` or `pod<hash>`.
    pod_interface: str
    #: The tap the domain's `<interface type='ethernet'>` names (`managed='no'`).
    tap: str
    #: The bridge holding the tap (and, for bridge binding, the renamed pod NIC).
    bridge: str
    #: The pod interface's new name under bridge binding (`eth0-nic`, `<hash>-nic`).
    nic: str


def pod_links(networks: Iterable[Network]) -> Mapping[str, PodLinks]:
    """Network name -> its links, for the primary network and each Multus network."""
    by_name = {network.name: network for network in networks}
    return {
        name: PodLinks(
            pod_interface=pod_interface,
            tap=tap_name(pod_interface, by_name[name]),
            bridge=bridge_name(pod_interface),
            nic=nic_name(pod_interface),
        )
        for name, pod_interface in pod_interface_names(by_name.values()).items()
    }
