"""Upstream's address clean-up at decode time (`API/core/v1/sanitizers.go`, kubevirt#6498).

Upstream's Go types rewrite three address fields whenever a VMI spec is decoded, so
"0127.0.0.3" is read as 127.0.0.3 and "10.10.010.0/24" as 10.10.10.0/24 (Go's old, sloppy
IPv4 parser: leading zeros are decimal). Values that are no address at all stay as they
are, for validation to refuse. The fields: ``domain.devices.interfaces[].dhcpOptions.
ntpServers``, ``networks[].pod.vmNetworkCIDR`` and ``dnsConfig.nameservers``. Both the
typed load (every VirtualMachineInstanceSpec) and the webhooks' raw defaulting call
:func:`sanitize_vmi_spec`, so the stored object carries the clean values, as upstream's
mutating webhook (which re-encodes the decoded spec) leaves it.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any

__all__ = ["sanitize_cidr", "sanitize_ip", "sanitize_vmi_spec"]


def _sloppy_ipv4(text: str) -> str | None:
    parts = text.split(".")
    if len(parts) != 4 or not all(p.isdigit() and p.isascii() for p in parts):
        return None
    octets = [int(p) for p in parts]
    if any(o > 255 for o in octets):
        return None
    return ".".join(map(str, octets))


def sanitize_ip(text: str) -> str | None:
    """The canonical text of the address ``text`` (leading zeros allowed), else None."""
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return _sloppy_ipv4(text)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)  # as Go's net.IP.String()
    return str(address)


def sanitize_cidr(text: str) -> str | None:
    """``<canonical address>/<prefix>`` for a CIDR (host bits kept, as upstream), else None."""
    address, slash, prefix = text.partition("/")
    clean = sanitize_ip(address) if slash else None
    if clean is None or not (prefix.isdigit() and prefix.isascii()):
        return None
    bits = 32 if ":" not in clean else 128
    if int(prefix) > bits:
        return None
    return f"{clean}/{int(prefix)}"


def _cleaned_list(values: object) -> list[Any] | None:
    # The list with each address cleaned; None when nothing changes.
    if not isinstance(values, list):
        return None
    out = [sanitize_ip(v) or v if isinstance(v, str) else v for v in values]
    return out if out != values else None


def sanitize_vmi_spec(spec: Mapping[str, Any]) -> Mapping[str, Any]:
    """``spec`` (a VMI spec as JSON) with upstream's address clean-up.

    Returns ``spec`` itself when nothing changes, else a copy sharing the untouched parts.
    """
    out = dict(spec)
    dns = spec.get("dnsConfig")
    if isinstance(dns, Mapping):
        servers = _cleaned_list(dns.get("nameservers"))
        if servers is not None:
            out["dnsConfig"] = {**dns, "nameservers": servers}
    networks = spec.get("networks")
    if isinstance(networks, list):
        cleaned = [_cleaned_network(n) for n in networks]
        if cleaned != networks:
            out["networks"] = cleaned
    domain = spec.get("domain")
    devices = domain.get("devices") if isinstance(domain, Mapping) else None
    interfaces = devices.get("interfaces") if isinstance(devices, Mapping) else None
    if (
        isinstance(domain, Mapping)
        and isinstance(devices, Mapping)
        and isinstance(interfaces, list)
    ):
        cleaned = [_cleaned_interface(i) for i in interfaces]
        if cleaned != interfaces:
            out["domain"] = {**domain, "devices": {**devices, "interfaces": cleaned}}
    return out if out != spec else spec


def _cleaned_network(network: Any) -> Any:
    pod = network.get("pod") if isinstance(network, Mapping) else None
    cidr = pod.get("vmNetworkCIDR") if isinstance(pod, Mapping) else None
    clean = sanitize_cidr(cidr) if isinstance(cidr, str) else None
    if not isinstance(pod, Mapping) or clean is None or clean == cidr:
        return network
    return {**network, "pod": {**pod, "vmNetworkCIDR": clean}}


def _cleaned_interface(interface: Any) -> Any:
    dhcp = interface.get("dhcpOptions") if isinstance(interface, Mapping) else None
    servers = _cleaned_list(dhcp.get("ntpServers")) if isinstance(dhcp, Mapping) else None
    if not isinstance(dhcp, Mapping) or servers is None:
        return interface
    return {**interface, "dhcpOptions": {**dhcp, "ntpServers": servers}}
