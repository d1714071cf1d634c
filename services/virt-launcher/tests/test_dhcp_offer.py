"""The offer: address and every option as upstream sends them, from phase 1, resolv.conf and the VMI."""

from __future__ import annotations

import ipaddress
import struct
from typing import Any

import pytest
from kubevirt_api import VirtualMachineInstance, load
from virt_domain.podnetwork import Binding, DhcpLease, PodNetwork, StaticRoute
from virt_launcher.dhcp import DhcpConfigError, parse_resolv_conf, vmi_offers
from virt_launcher.dhcp.offer import LEASE_SECONDS, classless_routes

RESOLV = parse_resolv_conf(
    "search default.svc.cluster.local svc.cluster.local cluster.local\n"
    "nameserver 10.96.0.10\n"
    "nameserver fd00::10\n"
    "options ndots:5\n"
)
MASQUERADE = PodNetwork(
    interface="default",
    binding=Binding.MASQUERADE,
    tap="tap0",
    bridge="k6t-eth0",
    mac="02:00:00:aa:bb:01",
    mtu=1450,
    lease=DhcpLease("10.0.2.1", "10.0.2.2", 24, "10.0.2.1"),
)
BRIDGE = PodNetwork(
    interface="default",
    binding=Binding.BRIDGE,
    tap="tap0",
    bridge="k6t-eth0",
    mac="0a:58:0a:f4:00:07",
    mtu=1500,
    lease=DhcpLease(
        "169.254.75.10",
        "10.244.0.7",
        24,
        "10.244.0.1",
        routes=(StaticRoute("0.0.0.0/0", "10.244.0.1"), StaticRoute("10.96.0.0/12", "10.244.0.1")),
        match_mac=True,
    ),
)


def vmi(spec: dict[str, Any] | None = None, **interface: Any) -> VirtualMachineInstance:
    body = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstance",
        "metadata": {"name": "testvm.example", "namespace": "default", "uid": "u"},
        "spec": {
            "domain": {
                "devices": {"interfaces": [{"name": "default", "masquerade": {}, **interface}]}
            },
            "networks": [{"name": "default", "pod": {}}],
            **(spec or {}),
        },
    }
    return load(VirtualMachineInstance, body)


def options_of(network: PodNetwork = MASQUERADE, **kwargs: Any) -> dict[int, bytes]:
    spec = kwargs.pop("spec", None)
    (offer,) = vmi_offers(vmi(spec, **kwargs), [network], RESOLV)
    return dict(offer.options)


def labels(*domains: str) -> bytes:
    out = b""
    for domain in domains:
        for label in domain.split("."):
            out += bytes([len(label)]) + label.encode()
        out += b"\0"
    return out


def test_masquerade_offers_the_guest_address_and_upstreams_options() -> None:
    (offer,) = vmi_offers(vmi(), [MASQUERADE], RESOLV)
    assert (str(offer.guest_ip), str(offer.server_ip), offer.bridge) == (
        "10.0.2.2",
        "10.0.2.1",
        "k6t-eth0",
    )
    assert offer.client_mac is None
    options = dict(offer.options)
    assert options[1] == ipaddress.IPv4Address("255.255.255.0").packed
    assert options[3] == ipaddress.IPv4Address("10.0.2.1").packed
    assert options[54] == ipaddress.IPv4Address("10.0.2.1").packed
    assert options[51] == struct.pack("!I", LEASE_SECONDS) == struct.pack("!I", 86313600)
    # IPv4 nameservers only.
    assert options[6] == ipaddress.IPv4Address("10.96.0.10").packed
    assert options[26] == struct.pack("!H", 1450)
    # The VMI name's first label.
    assert options[12] == b"testvm"
    assert options[119] == labels("default.svc.cluster.local", "svc.cluster.local", "cluster.local")
    assert options[15] == b"default.svc.cluster.local"
    assert 121 not in options


def test_spec_hostname_wins_and_subdomain_is_prepended_to_the_search() -> None:
    options = options_of(spec={"hostname": "myhost", "subdomain": "mysub"})
    assert options[12] == b"myhost"
    assert options[119].startswith(labels("mysub.default.svc.cluster.local"))
    assert options[15] == b"mysub.default.svc.cluster.local"


def test_bridge_answers_only_its_mac_and_sends_classless_routes_default_last() -> None:
    (offer,) = vmi_offers(vmi(), [BRIDGE], RESOLV)
    assert offer.client_mac == "0a:58:0a:f4:00:07"
    options = dict(offer.options)
    assert options[121] == bytes([12, 10, 96, 10, 244, 0, 1, 0, 10, 244, 0, 1])
    assert options[54] == ipaddress.IPv4Address("169.254.75.10").packed


def test_classless_route_widths_take_only_significant_octets() -> None:
    assert classless_routes((StaticRoute("10.1.2.128/25", "10.0.0.1"),)) == bytes(
        [25, 10, 1, 2, 128, 10, 0, 0, 1]
    )


def test_dhcp_options_from_the_interface() -> None:
    options = options_of(
        dhcpOptions={
            "tftpServerName": "tftp.example",
            "bootFileName": "pxelinux.0",
            "ntpServers": ["127.0.0.3", "10.0.0.4"],
            "privateOptions": [
                {"option": 240, "value": "extra.options.kubevirt.io"},
                {"option": 240, "value": "last wins"},
                {"option": 100, "value": "not private: skipped"},
            ],
        }
    )
    assert options[66] == b"tftp.example"
    assert options[67] == b"pxelinux.0"
    assert options[42] == bytes([127, 0, 0, 3, 10, 0, 0, 4])
    assert options[240] == b"last wins"
    assert 100 not in options


def test_an_ipv6_ntp_server_is_refused_with_its_field() -> None:
    with pytest.raises(DhcpConfigError) as caught:
        options_of(dhcpOptions={"ntpServers": ["fd00::1"]})
    assert caught.value.field == "spec.domain.devices.interfaces[0].dhcpOptions.ntpServers[0]"


def test_a_search_list_longer_than_an_option_is_refused() -> None:
    resolv = parse_resolv_conf("search " + " ".join(f"d{i}.{'x' * 60}.example" for i in range(5)))
    with pytest.raises(DhcpConfigError, match="more than 255"):
        vmi_offers(vmi(), [MASQUERADE], resolv)


def test_networks_without_a_lease_get_no_server() -> None:
    no_ipv4 = PodNetwork("default", Binding.BRIDGE, "tap0", "k6t-eth0", "0a:58:0a:f4:00:07", 1500)
    assert vmi_offers(vmi(), [no_ipv4], RESOLV) == []


def test_resolv_conf_defaults_and_odd_lines() -> None:
    parsed = parse_resolv_conf("nameserver 1.2.3.4 5.6.7.8\nnameserver nonsense\n# comment\n")
    assert [str(ip) for ip in parsed.ipv4_nameservers] == ["8.8.8.8"]
    assert parsed.search == ("cluster.local",)
    assert parse_resolv_conf("search A.Example b.example\n").search == ("a.example", "b.example")
