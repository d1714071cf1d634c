"""The pod network facts survive the wire, and a bad one is refused naming its field."""

from __future__ import annotations

import dataclasses

import pytest
from virt_domain.podnetwork import Binding, DhcpLease, PodNetwork, StaticRoute
from virt_rpc.podnetwork import InvalidNetworkError, networks_from_wire, networks_to_wire

MASQUERADE = PodNetwork(
    interface="default",
    binding=Binding.MASQUERADE,
    tap="tap0",
    bridge="k6t-eth0",
    mac="02:11:22:33:44:55",
    mtu=1450,
    lease=DhcpLease(
        server_ip="10.0.2.1", guest_ip="10.0.2.2", prefix_length=24, gateway="10.0.2.1"
    ),
    pod_ips=("10.244.0.7",),
)
BRIDGE = PodNetwork(
    interface="br",
    binding=Binding.BRIDGE,
    tap="tap1",
    bridge="k6t-net1",
    mac="0a:58:0a:f4:00:07",
    mtu=1500,
    lease=DhcpLease(
        server_ip="169.254.75.11",
        guest_ip="10.244.0.7",
        prefix_length=24,
        gateway="10.244.0.1",
        routes=(StaticRoute("10.244.0.0/16", "10.244.0.1"), StaticRoute("0.0.0.0/0", "10.244.0.1")),
        match_mac=True,
    ),
)


def test_every_field_arrives_as_sent() -> None:
    wire = networks_to_wire([MASQUERADE, BRIDGE])
    again = [type(w).parse(bytes(w)) for w in wire]
    assert networks_from_wire(again) == (MASQUERADE, BRIDGE)


def test_no_lease_means_no_dhcp() -> None:
    quiet = dataclasses.replace(MASQUERADE, lease=None)
    assert networks_from_wire(networks_to_wire([quiet])) == (quiet,)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"binding": "slirp"}, "networks[0].binding"),
        ({"tap": "../../etc"}, "networks[0].tap"),
        ({"bridge": "a-name-far-too-long"}, "networks[0].bridge"),
        ({"mac": "02:11:22:33:44"}, "networks[0].mac"),
        ({"mtu": 0}, "networks[0].mtu"),
        ({"pod_ips": ["10.244.0.300"]}, "networks[0].pod_ips[0]"),
    ],
)
def test_a_bad_field_is_refused_by_name(change: dict[str, object], field: str) -> None:
    [wire] = networks_to_wire([MASQUERADE])
    for name, value in change.items():
        setattr(wire, name, value)
    with pytest.raises(InvalidNetworkError) as caught:
        networks_from_wire([wire])
    assert caught.value.field == field


def test_a_bad_lease_is_refused_by_name() -> None:
    [wire] = networks_to_wire([BRIDGE])
    assert wire.lease is not None
    wire.lease.routes[0].destination = "10.244.0.0/33"
    with pytest.raises(
        InvalidNetworkError, match=r"networks\[0\]\.lease\.routes\[0\]\.destination"
    ):
        networks_from_wire([wire])
    wire.lease.routes[0].destination = "10.244.0.0/16"
    wire.lease.guest_ip = "fd10::2"
    with pytest.raises(InvalidNetworkError, match="IPv4 addresses only"):
        networks_from_wire([wire])


def test_an_interface_named_twice_is_refused() -> None:
    with pytest.raises(InvalidNetworkError, match=r"networks\[1\]\.interface"):
        networks_from_wire(networks_to_wire([MASQUERADE, MASQUERADE]))
