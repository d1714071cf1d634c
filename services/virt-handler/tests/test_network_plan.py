"""The pod network plan: which interfaces, which links and sysctls, the NAT and the lease."""

from __future__ import annotations

from typing import Any

import pytest
from kubevirt_api import VirtualMachineInstance, load
from virt_domain.podnetwork import Binding, DhcpLease, PodNetwork, StaticRoute
from virt_handler.netplan import (
    ForwardedPort,
    InterfacePlan,
    NetworkPlanError,
    PodAddress,
    PodFacts,
    PodLink,
    PodRoute,
    link_plan,
    nat_ruleset,
    plan_interfaces,
    pod_network,
)

POD_MAC = "0a:58:0a:f4:00:05"
ETH0 = PodLink(
    "eth0",
    2,
    POD_MAC,
    1450,
    "veth",
    addresses=(PodAddress("10.244.0.5", 24), PodAddress("fe80::1", 64), PodAddress("fd00::5", 64)),
)
ROUTES = (
    PodRoute("0.0.0.0/0", "10.244.0.1", "eth0"),
    PodRoute("10.244.0.0/24", "", "eth0"),
    PodRoute("10.96.0.0/12", "10.244.0.254", "eth0"),
)
FACTS = PodFacts((ETH0,), ROUTES)


def _vmi(spec: dict[str, Any]) -> VirtualMachineInstance:
    return load(VirtualMachineInstance, {"metadata": {"name": "vm"}, "spec": spec})


def _one(interface: dict[str, Any], pod: dict[str, Any] | None = None) -> InterfacePlan:
    (plan,) = plan_interfaces(
        _vmi(
            {
                "domain": {"devices": {"interfaces": [{"name": "default", **interface}]}},
                "networks": [{"name": "default", "pod": pod or {}}],
            }
        )
    )
    return plan


def _rules(ruleset: dict[str, Any]) -> list[tuple[str, list[Any]]]:
    return [
        (c["add"]["rule"]["chain"], c["add"]["rule"]["expr"])
        for c in ruleset["nftables"]
        if "rule" in c.get("add", {})
    ]


def _match(protocol: str, name: str, right: object) -> dict[str, Any]:
    left = {"payload": {"protocol": protocol, "field": name}}
    return {"match": {"op": "==", "left": left, "right": right}}


COUNTER = {"counter": None}
DNAT = {"dnat": {"addr": "10.0.2.2"}}
SNAT = {"snat": {"addr": "10.0.2.1"}}
LOOPBACK = {"set": ["127.0.0.1"]}
COMMON = [
    ("postrouting", [_match("ip", "saddr", "10.0.2.2"), COUNTER, {"masquerade": None}]),
    (
        "prerouting",
        [
            {"match": {"op": "==", "left": {"meta": {"key": "iifname"}}, "right": "eth0"}},
            COUNTER,
            {"jump": {"target": "KUBEVIRT_PREINBOUND"}},
        ],
    ),
    (
        "postrouting",
        [
            {"match": {"op": "==", "left": {"meta": {"key": "oifname"}}, "right": "k6t-eth0"}},
            COUNTER,
            {"jump": {"target": "KUBEVIRT_POSTINBOUND"}},
        ],
    ),
]


def test_the_default_interface_is_masquerade_on_tap0() -> None:
    assert plan_interfaces(_vmi({"domain": {"devices": {}}})) == [
        InterfacePlan("default", 0, "tap0", Binding.MASQUERADE)
    ]
    assert plan_interfaces(_vmi({"domain": {"devices": {"autoattachPodInterface": False}}})) == []


def test_only_the_primary_network_gets_a_binding_and_taps_follow_the_name_scheme() -> None:
    vmi = _vmi(
        {
            "domain": {
                "devices": {
                    "interfaces": [
                        {"name": "blue", "bridge": {}},
                        {"name": "default", "bridge": {}, "macAddress": "02-AA-BB-CC-DD-EE"},
                        {"name": "gone", "bridge": {}, "state": "absent"},
                    ]
                }
            },
            "networks": [
                {"name": "blue", "multus": {"networkName": "blue-net"}},
                {"name": "default", "pod": {}},
                {"name": "gone", "multus": {"networkName": "gone-net"}},
            ],
        }
    )
    assert plan_interfaces(vmi) == [
        InterfacePlan("blue", 0, "tap16477688c0e", None),
        InterfacePlan("default", 1, "tap0", Binding.BRIDGE, "02:aa:bb:cc:dd:ee"),
    ]
    # The converter's option wins, as in the domain it renders.
    assert plan_interfaces(vmi, {"default": "tapx"})[1].tap == "tapx"


def test_no_ports_forward_everything_to_the_guest() -> None:
    plan = link_plan(_one({"masquerade": {}}), FACTS)
    assert plan.nat is not None
    assert _rules(dict(plan.nat)) == [
        *COMMON,
        ("KUBEVIRT_PREINBOUND", [COUNTER, DNAT]),
        ("KUBEVIRT_POSTINBOUND", [_match("ip", "saddr", LOOPBACK), COUNTER, SNAT]),
        ("output", [_match("ip", "daddr", LOOPBACK), COUNTER, DNAT]),
    ]


def test_declared_tcp_and_udp_ports_only_are_forwarded() -> None:
    plan = _one({"masquerade": {}, "ports": [{"port": 80}, {"port": 53, "protocol": "UDP"}]})
    assert plan.ports == (ForwardedPort("tcp", 80), ForwardedPort("udp", 53))
    nat = link_plan(plan, FACTS).nat
    assert nat is not None
    per_port = []
    for protocol, port in (("tcp", 80), ("udp", 53)):
        per_port += [
            ("KUBEVIRT_PREINBOUND", [_match(protocol, "dport", {"set": [port]}), COUNTER, DNAT]),
            (
                "KUBEVIRT_POSTINBOUND",
                [
                    _match(protocol, "dport", port),
                    _match("ip", "saddr", LOOPBACK),
                    COUNTER,
                    SNAT,
                ],
            ),
            (
                "output",
                [_match("ip", "daddr", LOOPBACK), _match(protocol, "dport", port), COUNTER, DNAT],
            ),
        ]
    assert _rules(dict(nat)) == [*COMMON, *per_port]


def test_the_ruleset_recreates_upstreams_table_and_chains_in_one_batch() -> None:
    commands = nat_ruleset("10.0.2.2", "10.0.2.1")["nftables"]
    heads = [next(iter(c)) for c in commands[:3]]
    # add + flush first: applying it again replaces the rules instead of doubling them.
    assert heads == ["metainfo", "add", "flush"]
    chains = {
        c["add"]["chain"]["name"]: (c["add"]["chain"].get("hook"), c["add"]["chain"].get("prio"))
        for c in commands
        if "chain" in c.get("add", {})
    }
    assert chains == {
        "prerouting": ("prerouting", -100),
        "input": ("input", 100),
        "output": ("output", -100),
        "postrouting": ("postrouting", 100),
        "KUBEVIRT_PREINBOUND": (None, None),
        "KUBEVIRT_POSTINBOUND": (None, None),
    }


def test_masquerade_links_sysctls_and_lease() -> None:
    plan = _one({"masquerade": {}})
    links = link_plan(plan, FACTS)
    assert (links.bridge, links.bridge_mac, links.mtu, links.bridge_address) == (
        "k6t-eth0",
        "02:00:00:00:00:00",
        1450,
        "10.0.2.1/24",
    )
    assert dict(links.sysctls) == {
        "ipv4/ip_forward": "1",
        "ipv4/conf/k6t-eth0/route_localnet": "1",
        "ipv4/ip_unprivileged_port_start": "0",
    }
    assert not links.rename_pod_link
    assert pod_network(plan, FACTS) == PodNetwork(
        "default",
        Binding.MASQUERADE,
        "tap0",
        "k6t-eth0",
        POD_MAC,
        1450,
        DhcpLease("10.0.2.1", "10.0.2.2", 24, "10.0.2.1"),
        ("10.244.0.5", "fd00::5"),
    )


def test_a_custom_cidr_moves_gateway_and_guest_and_the_spec_mac_wins() -> None:
    plan = _one(
        {"masquerade": {}, "macAddress": "02:00:00:aa:bb:cc"}, {"vmNetworkCIDR": "10.10.10.0/24"}
    )
    links = link_plan(plan, FACTS)
    assert links.bridge_address == "10.10.10.1/24"
    assert links.nat is not None
    assert ("KUBEVIRT_PREINBOUND", [COUNTER, {"dnat": {"addr": "10.10.10.2"}}]) in _rules(
        dict(links.nat)
    )
    network = pod_network(plan, FACTS)
    assert network.mac == "02:00:00:aa:bb:cc"
    assert network.lease == DhcpLease("10.10.10.1", "10.10.10.2", 24, "10.10.10.1")


def test_a_cidr_without_room_for_a_guest_is_refused() -> None:
    with pytest.raises(NetworkPlanError, match="fewer than two"):
        link_plan(_one({"masquerade": {}}, {"vmNetworkCIDR": "10.0.2.0/32"}), FACTS)


def test_bridge_binding_hands_the_pod_address_and_routes_to_the_guest() -> None:
    plan = _one({"bridge": {}})
    links = link_plan(plan, FACTS)
    assert links.rename_pod_link
    assert links.nat is None
    assert links.bridge_address == "169.254.75.10/32"
    assert (links.stand_in_mac, links.stand_in_addresses) == (
        POD_MAC,
        (PodAddress("10.244.0.5", 24),),
    )
    assert dict(links.sysctls)["ipv4/conf/all/arp_ignore"] == "1"
    expected = PodNetwork(
        "default",
        Binding.BRIDGE,
        "tap0",
        "k6t-eth0",
        POD_MAC,
        1450,
        DhcpLease(
            "169.254.75.10",
            "10.244.0.5",
            24,
            "10.244.0.1",
            # Non-local routes only, the default one last.
            (StaticRoute("10.96.0.0/12", "10.244.0.254"), StaticRoute("0.0.0.0/0", "10.244.0.1")),
            match_mac=True,
        ),
        ("10.244.0.5",),  # IPv6 is dropped for bridge binding, as upstream
    )
    assert pod_network(plan, FACTS) == expected
    # After setup: eth0 is the stand-in (ifb) and the pod's NIC is eth0-nic, without addresses.
    prepared = PodFacts(
        (
            PodLink("eth0-nic", 2, "02:11:22:33:44:55", 1450, "veth", master="k6t-eth0"),
            PodLink("k6t-eth0", 3, "02:11:22:33:44:55", 1450, "bridge"),
            PodLink("eth0", 4, POD_MAC, 1450, "ifb", addresses=(PodAddress("10.244.0.5", 24),)),
        ),
        ROUTES,
    )
    assert pod_network(plan, prepared) == expected
    assert link_plan(plan, prepared).stand_in_addresses == (PodAddress("10.244.0.5", 24),)


def test_bridge_binding_without_ipv4_is_refused_and_a_pod_without_eth0_too() -> None:
    v6_only = PodFacts(
        (PodLink("eth0", 2, POD_MAC, 1500, "veth", addresses=(PodAddress("fd00::5", 64),)),)
    )
    with pytest.raises(NetworkPlanError, match="IPv4"):
        link_plan(_one({"bridge": {}}), v6_only)
    with pytest.raises(NetworkPlanError, match="no eth0"):
        pod_network(_one({"masquerade": {}}), PodFacts())


@pytest.mark.parametrize(
    ("domain", "queues"),
    [
        ({"cpu": {"cores": 4}, "devices": {"networkInterfaceMultiqueue": True}}, 4),
        ({"cpu": {"cores": 4}, "devices": {}}, 1),  # multiqueue not asked for
        ({"cpu": {"sockets": 2, "threads": 2}, "devices": {"networkInterfaceMultiqueue": True}}, 4),
    ],
)
def test_the_tap_gets_as_many_queues_as_the_converter_gives_the_nic(
    domain: dict[str, Any], queues: int
) -> None:
    """QEMU opens a multi-queue NIC's tap once per queue: phase 1 must make it multi-queue."""
    devices = {**domain["devices"], "interfaces": [{"name": "default", "masquerade": {}}]}
    (plan,) = plan_interfaces(
        _vmi(
            {"domain": {**domain, "devices": devices}, "networks": [{"name": "default", "pod": {}}]}
        )
    )
    assert plan.queues == queues


def test_a_non_virtio_nic_has_one_queue_whatever_multiqueue_says() -> None:
    vmi = _vmi(
        {
            "domain": {
                "cpu": {"cores": 4},
                "devices": {
                    "networkInterfaceMultiqueue": True,
                    "interfaces": [{"name": "default", "masquerade": {}, "model": "e1000"}],
                },
            },
            "networks": [{"name": "default", "pod": {}}],
        }
    )
    (plan,) = plan_interfaces(vmi)
    assert plan.queues == 1
