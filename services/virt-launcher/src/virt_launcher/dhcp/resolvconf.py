"""The pod's /etc/resolv.conf as the guest's DHCP DNS settings (upstream's `pkg/network/dns`).

Pure parsing; reading the file is the caller's (it is small, but the read goes through a
thread like every other file read of the launcher).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

__all__ = ["RESOLV_CONF", "ResolvConf", "longest_service_domain", "parse_resolv_conf"]

RESOLV_CONF = "/etc/resolv.conf"

# Upstream's fallbacks when the file names no nameserver / no search domain.
_DEFAULT_NAMESERVER = ipaddress.IPv4Address("8.8.8.8")
_DEFAULT_SEARCH = "cluster.local"
# A Kubernetes service domain: <namespace>.svc.<cluster domain>.
_SERVICE_INFIX = ".svc."


@dataclass(frozen=True, slots=True)
class ResolvConf:
    """The nameservers and search domains the guest is offered."""

    ipv4_nameservers: tuple[ipaddress.IPv4Address, ...]
    ipv6_nameservers: tuple[ipaddress.IPv6Address, ...]
    search: tuple[str, ...]


def parse_resolv_conf(text: str) -> ResolvConf:
    """Nameservers (one per ``nameserver`` line) and search domains (lower-cased), in order.

    As upstream: a ``nameserver`` line with more than one value or a non-address is
    skipped; no nameserver at all gives 8.8.8.8, no search domain gives cluster.local.
    """
    v4: list[ipaddress.IPv4Address] = []
    v6: list[ipaddress.IPv6Address] = []
    search: list[str] = []
    for line in text.splitlines():
        fields = line.split()
        if not fields:
            continue
        if fields[0] == "nameserver" and len(fields) == 2:
            try:
                address = ipaddress.ip_address(fields[1])
            except ValueError:
                continue
            if isinstance(address, ipaddress.IPv4Address):
                v4.append(address)
            else:
                v6.append(address)
        elif fields[0] == "search":
            search.extend(domain.lower() for domain in fields[1:])
    if not v4 and not v6:
        v4.append(_DEFAULT_NAMESERVER)
    return ResolvConf(tuple(v4), tuple(v6), tuple(search) or (_DEFAULT_SEARCH,))


def longest_service_domain(search: tuple[str, ...]) -> str:
    """The longest search domain with ``.svc.`` in it ("" when none has)."""
    return max((d for d in search if _SERVICE_INFIX in d), key=len, default="")
