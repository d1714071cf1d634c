"""virt_domain's PodNetwork <-> the wire's NetworkSetup, field for field.

virt-handler sends what its network setup made (`networks_to_wire`); virt-launcher
decodes it (`networks_from_wire`), refusing what it cannot use with the field named:
an unknown binding, a bad address, a name that is not one interface name.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Sequence

from virt_domain.podnetwork import Binding, DhcpLease, PodNetwork, StaticRoute

from virt_rpc.generated.kubevirtpy.launcher.v1 import DhcpConfig as WireLease
from virt_rpc.generated.kubevirtpy.launcher.v1 import DhcpRoute as WireRoute
from virt_rpc.generated.kubevirtpy.launcher.v1 import NetworkSetup as WireNetwork

__all__ = ["InvalidNetworkError", "networks_from_wire", "networks_to_wire"]

# A Linux link name: 1..15 characters, no '/', no white space.
_LINK = re.compile(r"^[A-Za-z0-9_.:-]{1,15}$")
_MAC = re.compile(r"^[0-9a-f]{2}(:[0-9a-f]{2}){5}$")


class InvalidNetworkError(ValueError):
    """A PodNetwork field the launcher cannot use; ``field`` names it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def networks_to_wire(networks: Iterable[PodNetwork]) -> list[WireNetwork]:
    """The wire messages for ``networks``."""
    return [
        WireNetwork(
            interface=n.interface,
            binding=n.binding.value,
            tap=n.tap,
            bridge=n.bridge,
            mac=n.mac,
            mtu=n.mtu,
            lease=None if n.lease is None else _lease_to_wire(n.lease),
            pod_ips=list(n.pod_ips),
        )
        for n in networks
    ]


def _lease_to_wire(lease: DhcpLease) -> WireLease:
    return WireLease(
        server_ip=lease.server_ip,
        guest_ip=lease.guest_ip,
        prefix_length=lease.prefix_length,
        gateway=lease.gateway,
        routes=[WireRoute(r.destination, r.gateway) for r in lease.routes],
        match_mac=lease.match_mac,
    )


def networks_from_wire(messages: Sequence[WireNetwork]) -> tuple[PodNetwork, ...]:
    """The PodNetworks the request carries; raises InvalidNetworkError naming the field."""
    out = []
    seen: set[str] = set()
    for i, m in enumerate(messages):
        at = f"networks[{i}]"
        if not m.interface or m.interface in seen:
            raise InvalidNetworkError(f"{at}.interface", f"{m.interface!r} is empty or repeated")
        seen.add(m.interface)
        try:
            binding = Binding(m.binding)
        except ValueError:
            raise InvalidNetworkError(
                f"{at}.binding", f"{m.binding!r} is not masquerade or bridge"
            ) from None
        for name in ("tap", "bridge"):
            if not _LINK.match(getattr(m, name)):
                raise InvalidNetworkError(
                    f"{at}.{name}", f"{getattr(m, name)!r} is not a link name"
                )
        if not _MAC.match(m.mac):
            raise InvalidNetworkError(f"{at}.mac", f"{m.mac!r} is not a lower-case MAC")
        if not 68 <= m.mtu <= 65535:
            raise InvalidNetworkError(f"{at}.mtu", f"{m.mtu} is outside 68..65535")
        for j, ip in enumerate(m.pod_ips):
            _address(f"{at}.pod_ips[{j}]", ip)
        out.append(
            PodNetwork(
                interface=m.interface,
                binding=binding,
                tap=m.tap,
                bridge=m.bridge,
                mac=m.mac,
                mtu=m.mtu,
                lease=None if m.lease is None else _lease_from_wire(f"{at}.lease", m.lease),
                pod_ips=tuple(m.pod_ips),
            )
        )
    return tuple(out)


def _address(field: str, value: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    try:
        return ipaddress.ip_address(value)
    except ValueError:
        raise InvalidNetworkError(field, f"{value!r} is not an IP address") from None


def _lease_from_wire(at: str, m: WireLease) -> DhcpLease:
    for name in ("server_ip", "guest_ip"):
        if _address(f"{at}.{name}", getattr(m, name)).version != 4:
            raise InvalidNetworkError(f"{at}.{name}", "DHCPv4 offers IPv4 addresses only")
    if not 1 <= m.prefix_length <= 32:
        raise InvalidNetworkError(f"{at}.prefix_length", f"{m.prefix_length} is outside 1..32")
    if m.gateway:
        _address(f"{at}.gateway", m.gateway)
    routes = []
    for k, r in enumerate(m.routes):
        try:
            ipaddress.IPv4Network(r.destination)
        except ValueError:
            raise InvalidNetworkError(
                f"{at}.routes[{k}].destination", f"{r.destination!r} is not an IPv4 CIDR"
            ) from None
        _address(f"{at}.routes[{k}].gateway", r.gateway)
        routes.append(StaticRoute(r.destination, r.gateway))
    return DhcpLease(
        server_ip=m.server_ip,
        guest_ip=m.guest_ip,
        prefix_length=m.prefix_length,
        gateway=m.gateway,
        routes=tuple(routes),
        match_mac=m.match_mac,
    )
