"""What the DHCP server offers one guest NIC: its address and every option, decided once.

Upstream's `prepareDHCPOptions` (`pkg/network/dhcp/server/server.go`) and `startDHCP`
(`pkg/network/dhcp/configurator.go`): the options are always all sent (the client's
parameter request list is ignored). Pure; :class:`DhcpConfigError` names what is wrong.
"""

from __future__ import annotations

import ipaddress
import re
import struct
from collections.abc import Sequence
from dataclasses import dataclass

from kubevirt_api import VirtualMachineInstance
from kubevirt_api.models import DHCPOptions
from virt_domain.hostname import guest_hostname
from virt_domain.podnetwork import Binding, PodNetwork, StaticRoute

from virt_launcher.dhcp.packet import Option
from virt_launcher.dhcp.resolvconf import ResolvConf, longest_service_domain

__all__ = [
    "LEASE_SECONDS",
    "DhcpConfigError",
    "GuestOffer",
    "classless_routes",
    "guest_offer",
    "vmi_offers",
]

#: Upstream's "infinite" lease: 999 days.
LEASE_SECONDS = 999 * 24 * 3600
_PRIVATE_OPTIONS = range(224, 255)
# Upstream's search-domain check (RFC 1123 labels, `_` allowed, lower case).
_SEARCH_DOMAIN = re.compile(
    r"^(?:[_a-z0-9](?:[_a-z0-9-]{0,61}[a-z0-9])?\.)*(?:[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?)?$"
)


class DhcpConfigError(ValueError):
    """The offer cannot be built: ``field`` names the input, ``message`` says why."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True, slots=True)
class GuestOffer:
    """One interface's answer: whom to answer, from where, and with what."""

    interface: str
    #: The in-pod bridge the server listens on (and only on).
    bridge: str
    server_ip: ipaddress.IPv4Address
    guest_ip: ipaddress.IPv4Address
    #: Answer only this MAC (bridge binding); None: any client (masquerade).
    client_mac: str | None
    #: (code, value) in the order they are written, after the message type.
    options: tuple[tuple[int, bytes], ...]


def guest_offer(
    network: PodNetwork,
    resolv: ResolvConf,
    hostname: str,
    subdomain: str = "",
    dhcp_options: DHCPOptions | None = None,
    *,
    path: str = "",
) -> GuestOffer:
    """The offer for ``network`` (which must carry a lease).

    ``path`` is the VMI interface's field path, to name ``dhcpOptions`` errors with.
    """
    lease = network.lease
    if lease is None:
        raise DhcpConfigError(f"networks[{network.interface}].lease", "no lease to offer")
    server_ip = ipaddress.IPv4Address(lease.server_ip)
    guest = ipaddress.IPv4Interface(f"{lease.guest_ip}/{lease.prefix_length}")
    options: list[tuple[int, bytes]] = [
        (Option.SERVER_IDENTIFIER, server_ip.packed),
        (Option.LEASE_TIME, struct.pack("!I", LEASE_SECONDS)),
        (Option.SUBNET_MASK, guest.netmask.packed),
    ]
    if lease.gateway:
        options.append((Option.ROUTER, ipaddress.IPv4Address(lease.gateway).packed))
    options.append(
        (Option.DOMAIN_NAME_SERVER, b"".join(ip.packed for ip in resolv.ipv4_nameservers))
    )
    options.append((Option.INTERFACE_MTU, struct.pack("!H", min(network.mtu, 0xFFFF))))
    if network.binding is Binding.BRIDGE and lease.routes:
        options.append((Option.CLASSLESS_ROUTES, classless_routes(lease.routes)))
    search = resolv.search
    with_subdomain = _subdomain_domain(search, subdomain)
    if with_subdomain:
        search = (with_subdomain, *search)
    options.append((Option.DOMAIN_SEARCH, _search_list(search)))
    options.append((Option.HOST_NAME, hostname.encode()))
    domain_name = max(search, key=len, default="")
    if domain_name:
        options.append((Option.DOMAIN_NAME, domain_name.encode()))
    options.extend(_custom(dhcp_options, f"{path}.dhcpOptions" if path else "dhcpOptions"))
    return GuestOffer(
        interface=network.interface,
        bridge=network.bridge,
        server_ip=server_ip,
        guest_ip=guest.ip,
        client_mac=network.mac if lease.match_mac else None,
        options=tuple((int(code), value) for code, value in options),
    )


def vmi_offers(
    vmi: VirtualMachineInstance, networks: Sequence[PodNetwork], resolv: ResolvConf
) -> list[GuestOffer]:
    """The offers for every network of ``vmi`` that carries a lease, in order.

    Hostname, subdomain and each interface's ``dhcpOptions`` come from the VMI.
    """
    interfaces = {
        source.name: (index, source)
        for index, source in enumerate(vmi.spec.domain.devices.interfaces or ())
    }
    hostname = guest_hostname(vmi)
    offers = []
    for network in networks:
        if network.lease is None:
            continue
        index, source = interfaces.get(network.interface, (None, None))
        offers.append(
            guest_offer(
                network,
                resolv,
                hostname,
                vmi.spec.subdomain or "",
                None if source is None else source.dhcp_options,
                path="" if index is None else f"spec.domain.devices.interfaces[{index}]",
            )
        )
    return offers


def _subdomain_domain(search: tuple[str, ...], subdomain: str) -> str:
    # Upstream's DomainNameWithSubdomain: `<subdomain>.<longest svc domain>`, unless
    # that domain already starts with the subdomain.
    if not subdomain:
        return ""
    domain = longest_service_domain(search)
    if domain and not domain.startswith(subdomain + "."):
        return f"{subdomain}.{domain}"
    return ""


def classless_routes(routes: tuple[StaticRoute, ...]) -> bytes:
    """Option 121's value (RFC 3442): each route as width, significant octets, gateway.

    Default routes go last, as upstream sorts them.
    """
    ordered = sorted(routes, key=lambda r: ipaddress.IPv4Network(r.destination).prefixlen == 0)
    out = bytearray()
    for route in ordered:
        destination = ipaddress.IPv4Network(route.destination, strict=False)
        width = destination.prefixlen
        out.append(width)
        out += destination.network_address.packed[: (width + 7) // 8]
        out += ipaddress.IPv4Address(route.gateway or "0.0.0.0").packed
    return bytes(out)


def _search_list(domains: tuple[str, ...]) -> bytes:
    # RFC 3397 carries RFC 1035 names; compression is optional, so none is used.
    out = bytearray()
    for domain in domains:
        if len(domain) > 253 or not _SEARCH_DOMAIN.match(domain):
            raise DhcpConfigError("resolv.conf search", f"{domain!r} is not a valid search domain")
        for label in domain.split("."):
            if label:
                out.append(len(label))
                out += label.encode()
        out.append(0)
    if len(out) > 255:
        raise DhcpConfigError(
            "resolv.conf search", f"the search list takes {len(out)} octets, more than 255"
        )
    return bytes(out)


def _custom(options: DHCPOptions | None, at: str) -> list[tuple[int, bytes]]:
    if options is None:
        return []
    found: list[tuple[int, bytes]] = []
    if options.tftp_server_name:
        found.append((Option.TFTP_SERVER_NAME, options.tftp_server_name.encode()))
    if options.boot_file_name:
        found.append((Option.BOOTFILE_NAME, options.boot_file_name.encode()))
    if options.ntp_servers:
        packed = bytearray()
        for index, server in enumerate(options.ntp_servers):
            try:
                packed += ipaddress.IPv4Address(server).packed
            except ValueError:
                raise DhcpConfigError(
                    f"{at}.ntpServers[{index}]", f"{server!r} is not an IPv4 address"
                ) from None
        found.append((Option.NTP_SERVERS, bytes(packed)))
    private: dict[int, bytes] = {}
    for entry in options.private_options or ():
        # As upstream: codes outside 224..254 are skipped (the webhook refuses them) and a
        # repeated code keeps its last value.
        if entry.option in _PRIVATE_OPTIONS:
            private[entry.option] = entry.value.encode()
    return found + sorted(private.items())
