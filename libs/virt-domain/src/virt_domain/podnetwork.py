"""What virt-handler's network setup made in the launcher pod, for virt-launcher to use.

Upstream splits a pod-network interface in two phases: virt-handler (privileged, in the
pod's network namespace) makes the bridge, the tap and the NAT, and virt-launcher
(unprivileged) fills the domain's `<interface>` and serves the guest DHCP. Upstream hands
phase 1's facts over in cache files; here they travel in the SyncVirtualMachine request
(`virt_rpc.podnetwork` maps them to the wire), so the launcher trusts no file in a
directory the handler and the pod share.

One :class:`PodNetwork` per VMI interface on the pod network. Pure values, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

__all__ = ["Binding", "DhcpLease", "PodNetwork", "StaticRoute"]


class Binding(StrEnum):
    """How the interface meets the pod network (`interfaces[].masquerade|bridge`)."""

    MASQUERADE = "masquerade"
    BRIDGE = "bridge"


@dataclass(frozen=True, slots=True)
class StaticRoute:
    """A classless static route (DHCP option 121): `destination` CIDR via `gateway`."""

    destination: str
    gateway: str


@dataclass(frozen=True, slots=True)
class DhcpLease:
    """What the launcher's DHCP server offers the guest on this interface.

    DNS servers and search domains are not here: the launcher reads them from the pod's
    own resolv.conf, and the hostname and `dhcpOptions` from the VMI.
    """

    #: The server identifier and the address the server answers from (10.0.2.1 for
    #: masquerade, the fake 169.254.75.1N for bridge binding).
    server_ip: str
    #: The guest's address and prefix length (10.0.2.2/24; bridge: the pod's IP).
    guest_ip: str
    prefix_length: int
    #: Default gateway offered (option 3); empty: none.
    gateway: str = ""
    #: Classless static routes (option 121), default route last; bridge binding only.
    routes: tuple[StaticRoute, ...] = ()
    #: Answer only the guest's own MAC (bridge binding); masquerade answers any client.
    match_mac: bool = False


@dataclass(frozen=True, slots=True)
class PodNetwork:
    """One VMI interface's share of the pod network after phase 1."""

    #: The VMI interface name (`spec.domain.devices.interfaces[].name`).
    interface: str
    binding: Binding
    #: The tap device in the pod's netns the domain's `<interface type='ethernet'>` uses.
    tap: str
    #: The in-pod bridge holding the tap; the DHCP server listens on it only.
    bridge: str
    #: The guest NIC's MAC (the spec's, else chosen in phase 1) and the link MTU.
    mac: str
    mtu: int
    #: What the DHCP server offers; None: no DHCP on this interface (no IPv4).
    lease: DhcpLease | None = None
    #: The pod's own IPs of this interface (status.interfaces[].ipAddresses for masquerade).
    pod_ips: tuple[str, ...] = field(default=())
