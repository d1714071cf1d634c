"""The guest's DHCPv4 server on the pod network (upstream's `pkg/network/dhcp`).

IPv4 only: upstream's DHCPv6 server (masquerade with an IPv6 pod) is not built yet.
"""

from __future__ import annotations

from virt_launcher.dhcp.offer import DhcpConfigError, GuestOffer, guest_offer, vmi_offers
from virt_launcher.dhcp.resolvconf import ResolvConf, parse_resolv_conf
from virt_launcher.dhcp.server import DhcpServer, DhcpStartError
from virt_launcher.dhcp.servers import DhcpServers

__all__ = [
    "DhcpConfigError",
    "DhcpServer",
    "DhcpServers",
    "DhcpStartError",
    "GuestOffer",
    "ResolvConf",
    "guest_offer",
    "parse_resolv_conf",
    "vmi_offers",
]
