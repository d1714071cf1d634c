"""What phase 1 of a VMI's pod network builds, decided from the VMI and the pod's facts. Pure.

Upstream KubeVirt's `NetPod.Setup` (`pkg/network/setup/netpod`): discover the pod's links,
addresses and routes, then compose the desired state per binding. Here the discovery is a
value (:class:`PodFacts`, read by `network.py`), and this module turns a VMI plus those facts
into the links to make (:class:`LinkPlan`), the sysctls, the nftables NAT ruleset (libnftables
JSON) and the `virt_domain.podnetwork.PodNetwork` handed to the launcher. No I/O.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubevirt_api import VirtualMachineInstance
from virt_domain import interface_queues
from virt_domain.namescheme import (
    PRIMARY_POD_INTERFACE,
    PRIMARY_TAP,
    bridge_name,
    is_primary,
    nic_name,
    pod_links,
)
from virt_domain.podnetwork import Binding, DhcpLease, PodNetwork, StaticRoute

__all__ = [
    "BRIDGE_FAKE_PREFIX",
    "DEFAULT_VM_CIDR",
    "MASQUERADE_BRIDGE_MAC",
    "POD_BRIDGE",
    "POD_IFACE",
    "RENAMED_POD_IFACE",
    "ForwardedPort",
    "InterfacePlan",
    "LinkPlan",
    "NetworkPlanError",
    "PodAddress",
    "PodFacts",
    "PodLink",
    "PodRoute",
    "bridge_fake_ip",
    "link_plan",
    "nat_ruleset",
    "plan_interfaces",
    "pod_network",
    "vm_addresses",
]

#: Upstream's `DefaultVMCIDR` (virtwrap/api/defaults.go): gateway = first host, guest = next.
DEFAULT_VM_CIDR = "10.0.2.0/24"
#: Upstream's `StaticMasqueradeBridgeMAC`; the admitter refuses it on a VMI.
MASQUERADE_BRIDGE_MAC = "02:00:00:00:00:00"
#: The pod's primary interface, its bridge, and its name once bridge binding renamed it.
POD_IFACE = PRIMARY_POD_INTERFACE
POD_BRIDGE = bridge_name(POD_IFACE)
RENAMED_POD_IFACE = nic_name(POD_IFACE)
#: Bridge binding's fake bridge address is this prefix + the interface index, /32.
BRIDGE_FAKE_PREFIX = "169.254.75.1"
_LOOPBACK = "127.0.0.1"
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,15}$")
_MAC = re.compile(r"^[0-9a-f]{2}([:-][0-9a-f]{2}){5}$", re.IGNORECASE)
_TABLE = {"family": "ip", "name": "nat"}
_BASE_CHAINS = (  # name, hook, priority: upstream's `ip nat` base chains
    ("prerouting", "prerouting", -100),
    ("input", "input", 100),
    ("output", "output", -100),
    ("postrouting", "postrouting", 100),
)
_PREINBOUND = "KUBEVIRT_PREINBOUND"
_POSTINBOUND = "KUBEVIRT_POSTINBOUND"


class NetworkPlanError(Exception):
    """The VMI or the pod does not allow a pod network to be planned."""


@dataclass(frozen=True, slots=True)
class PodAddress:
    """An address of a pod link (`address`/`prefix_length`), IPv4 or IPv6."""

    address: str
    prefix_length: int

    @property
    def version(self) -> int:
        return ipaddress.ip_address(self.address).version

    @property
    def cidr(self) -> str:
        return f"{self.address}/{self.prefix_length}"


@dataclass(frozen=True, slots=True)
class PodLink:
    """One link of the pod's netns as discovered."""

    name: str
    index: int
    mac: str
    mtu: int
    #: The rtnetlink link kind ("veth", "bridge", "tun", "ifb"; "" when none is reported).
    kind: str = ""
    #: The name of the bridge this link is a port of; "" when none.
    master: str = ""
    addresses: tuple[PodAddress, ...] = ()

    def ipv4(self) -> tuple[PodAddress, ...]:
        return tuple(a for a in self.addresses if a.version == 4)

    def global_ips(self) -> tuple[str, ...]:
        """IPv4 first, then IPv6 without link-local addresses (what a pod "has")."""
        v6 = [
            a.address
            for a in self.addresses
            if a.version == 6 and not ipaddress.ip_address(a.address).is_link_local
        ]
        return tuple(a.address for a in self.ipv4()) + tuple(v6)


@dataclass(frozen=True, slots=True)
class PodRoute:
    """An IPv4 route of the pod's main table: `destination` CIDR, via `gateway` ("" on-link)."""

    destination: str
    gateway: str
    device: str


@dataclass(frozen=True, slots=True)
class PodFacts:
    """The pod's netns as discovered: its links and its main-table IPv4 routes."""

    links: tuple[PodLink, ...] = ()
    routes: tuple[PodRoute, ...] = ()

    def link(self, name: str) -> PodLink | None:
        return next((link for link in self.links if link.name == name), None)


@dataclass(frozen=True, slots=True)
class ForwardedPort:
    """A port of `interfaces[].ports`: protocol `tcp` or `udp` (nft's spelling)."""

    protocol: str
    port: int


@dataclass(frozen=True, slots=True)
class InterfacePlan:
    """One VMI interface as phase 1 sees it, before looking at the pod."""

    interface: str
    index: int
    tap: str
    #: None: not on the pod network (a tap only; Multus interfaces are set up elsewhere).
    binding: Binding | None
    #: The spec's `macAddress`, lower case with colons; "" when unset.
    mac: str = ""
    vm_cidr: str = DEFAULT_VM_CIDR
    #: Empty: every port is forwarded (masquerade).
    ports: tuple[ForwardedPort, ...] = ()
    #: The NIC's queue count (virt_domain.interface_queues): above 1, a multi-queue tap.
    queues: int = 1


@dataclass(frozen=True, slots=True)
class LinkPlan:
    """The links and sysctls one pod-network interface needs (the applier makes them)."""

    tap: str
    bridge: str
    bridge_mac: str
    mtu: int
    #: The bridge's own address (CIDR): the masquerade gateway, or bridge binding's fake /32.
    bridge_address: str
    #: Sysctls inside the pod netns, as /proc/sys paths below net/ with their values.
    sysctls: tuple[tuple[str, str], ...]
    #: Bridge binding: the pod link renamed to `eth0-nic` and enslaved (learning off) ...
    rename_pod_link: bool = False
    #: ... and a stand-in link `eth0` (kind ifb) carrying the pod's MAC, MTU and addresses.
    stand_in_mac: str = ""
    stand_in_addresses: tuple[PodAddress, ...] = ()
    stand_in_routes: tuple[PodRoute, ...] = ()
    #: Masquerade: the libnftables JSON commands of the NAT.
    nat: Mapping[str, Any] | None = None


def plan_interfaces(
    vmi: VirtualMachineInstance, tap_devices: Mapping[str, str] | None = None
) -> list[InterfacePlan]:
    """The VMI's interfaces in spec order, with the taps the converter names for them.

    Taps follow `virt_domain.namescheme` (`tap0` for the primary network, `tap<hash>` for
    a secondary Multus one) unless `tap_devices` (the converter's option) names one. The
    primary network's interface gets its binding (none given: masquerade, kubevirt-py's
    default); a secondary one gets a tap only. Interfaces with state `absent`, or whose
    network has no link in the pod, are left out, as the converter does.
    """
    taps = tap_devices or {}
    devices = vmi.spec.domain.devices
    networks = {n.name: n for n in vmi.spec.networks or ()}
    interfaces = devices.interfaces
    if interfaces is None and not networks:
        if devices.autoattach_pod_interface is False:
            return []
        return [InterfacePlan("default", 0, taps.get("default", PRIMARY_TAP), Binding.MASQUERADE)]
    links = pod_links(networks.values())
    out = []
    for index, iface in enumerate(interfaces or ()):
        name = iface.name
        network = networks.get(name)
        if iface.state == "absent" or network is None or name not in links:
            continue
        tap = taps.get(name, links[name].tap)
        if not _NAME.match(tap):
            raise NetworkPlanError(f"tap device {tap!r} is not a valid link name")
        mac = (iface.mac_address or "").replace("-", ":").lower()
        if mac and not _MAC.match(mac):
            raise NetworkPlanError(f"interface {name}: {iface.mac_address!r} is not a MAC")
        queues = interface_queues(vmi, iface)
        if not is_primary(network):
            out.append(InterfacePlan(name, index, tap, None, mac, queues=queues))
            continue
        binding = Binding.BRIDGE if iface.bridge is not None else Binding.MASQUERADE
        ports = tuple(
            ForwardedPort((str(p.protocol) if p.protocol else "TCP").lower(), p.port)
            for p in iface.ports or ()
        )
        cidr = (network.pod.vm_network_cidr if network.pod else None) or DEFAULT_VM_CIDR
        out.append(InterfacePlan(name, index, tap, binding, mac, cidr, ports, queues))
    return out


def vm_addresses(cidr: str) -> tuple[str, str, int]:
    """(gateway, guest, prefix length) of a VM CIDR: its first and second host addresses."""
    try:
        network = ipaddress.IPv4Network(cidr, strict=False)
    except ValueError as error:
        raise NetworkPlanError(f"vmNetworkCIDR {cidr!r}: {error}") from None
    hosts = iter(network.hosts())  # a list for /31 and /32, a generator otherwise
    gateway, guest = next(hosts, None), next(hosts, None)
    if gateway is None or guest is None:
        raise NetworkPlanError(f"vmNetworkCIDR {cidr!r} has fewer than two hosts")
    return str(gateway), str(guest), network.prefixlen


def bridge_fake_ip(index: int) -> str:
    """Upstream's `bridgeFakeIP`: 169.254.75.1<index> (index 0 → 169.254.75.10)."""
    return f"{BRIDGE_FAKE_PREFIX}{index}"


def _match(left: Mapping[str, Any], right: object) -> dict[str, Any]:
    return {"match": {"op": "==", "left": left, "right": right}}


def _payload(protocol: str, name: str) -> dict[str, Any]:
    return {"payload": {"protocol": protocol, "field": name}}


def _rule(chain: str, *expr: Mapping[str, Any]) -> dict[str, Any]:
    return {"add": {"rule": {"family": "ip", "table": "nat", "chain": chain, "expr": list(expr)}}}


_COUNTER: dict[str, Any] = {"counter": None}


def nat_ruleset(
    guest: str,
    gateway: str,
    ports: Sequence[ForwardedPort] = (),
    pod_iface: str = POD_IFACE,
    bridge: str = POD_BRIDGE,
) -> dict[str, Any]:
    """Upstream's masquerade NAT (`MasqPod.setupNATByFamily`, IPv4) as one libnftables batch.

    The table is created if missing and flushed, then its chains and rules are added, in
    one transaction: applying it again (a restarted handler) leaves the same ruleset.
    """
    family = {"family": "ip", "table": "nat"}
    cmds: list[dict[str, Any]] = [
        {"add": {"table": _TABLE}},
        {"flush": {"table": _TABLE}},
    ]
    for name, hook, prio in _BASE_CHAINS:
        chain = {**family, "name": name, "type": "nat", "hook": hook, "prio": prio}
        cmds.append({"add": {"chain": {**chain, "policy": "accept"}}})
    for name in (_PREINBOUND, _POSTINBOUND):
        cmds.append({"add": {"chain": {**family, "name": name}}})
    saddr, daddr = _payload("ip", "saddr"), _payload("ip", "daddr")
    loopback = {"set": [_LOOPBACK]}
    dnat = {"dnat": {"addr": guest}}
    snat = {"snat": {"addr": gateway}}
    cmds += [
        _rule("postrouting", _match(saddr, guest), _COUNTER, {"masquerade": None}),
        _rule(
            "prerouting",
            _match({"meta": {"key": "iifname"}}, pod_iface),
            _COUNTER,
            {"jump": {"target": _PREINBOUND}},
        ),
        _rule(
            "postrouting",
            _match({"meta": {"key": "oifname"}}, bridge),
            _COUNTER,
            {"jump": {"target": _POSTINBOUND}},
        ),
    ]
    if not ports:
        cmds += [
            _rule(_PREINBOUND, _COUNTER, dnat),
            _rule(_POSTINBOUND, _match(saddr, loopback), _COUNTER, snat),
            _rule("output", _match(daddr, loopback), _COUNTER, dnat),
        ]
    for port in ports:
        dport = _payload(port.protocol, "dport")
        cmds += [
            _rule(_PREINBOUND, _match(dport, {"set": [port.port]}), _COUNTER, dnat),
            _rule(_POSTINBOUND, _match(dport, port.port), _match(saddr, loopback), _COUNTER, snat),
            _rule("output", _match(daddr, loopback), _match(dport, port.port), _COUNTER, dnat),
        ]
    return {"nftables": [{"metainfo": {"json_schema_version": 1}}, *cmds]}


def _pod_link(facts: PodFacts, plan: InterfacePlan) -> PodLink:
    """The pod's own interface: `eth0`, or (bridge binding, already set up) `eth0-nic`."""
    if plan.binding is Binding.BRIDGE:
        renamed = facts.link(RENAMED_POD_IFACE)
        if renamed is not None:
            return renamed
    link = facts.link(POD_IFACE)
    if link is None:
        raise NetworkPlanError(f"the pod has no {POD_IFACE}")
    return link


def _stand_in(facts: PodFacts) -> PodLink | None:
    """Bridge binding's `eth0` from an earlier run: an ifb next to `eth0-nic`."""
    link = facts.link(POD_IFACE)
    if link is not None and facts.link(RENAMED_POD_IFACE) is not None:
        return link
    return None


def link_plan(plan: InterfacePlan, facts: PodFacts) -> LinkPlan:
    """What to make in the pod's netns for one pod-network interface."""
    pod = _pod_link(facts, plan)
    if plan.binding is Binding.MASQUERADE:
        gateway, guest, prefix = vm_addresses(plan.vm_cidr)
        return LinkPlan(
            tap=plan.tap,
            bridge=POD_BRIDGE,
            bridge_mac=MASQUERADE_BRIDGE_MAC,
            mtu=pod.mtu,
            bridge_address=f"{gateway}/{prefix}",
            sysctls=(
                ("ipv4/ip_forward", "1"),
                (f"ipv4/conf/{POD_BRIDGE}/route_localnet", "1"),
                ("ipv4/ip_unprivileged_port_start", "0"),
            ),
            nat=nat_ruleset(guest, gateway, plan.ports),
        )
    stand_in = _stand_in(facts)
    source = stand_in or pod
    if not source.ipv4():
        raise NetworkPlanError(f"bridge binding needs an IPv4 address on {POD_IFACE}")
    routes = tuple(r for r in facts.routes if r.device == source.name)
    return LinkPlan(
        tap=plan.tap,
        bridge=POD_BRIDGE,
        # The renamed pod NIC takes the bridge's MAC; the guest takes the pod's.
        bridge_mac="",
        mtu=source.mtu,
        bridge_address=f"{bridge_fake_ip(plan.index)}/32",
        sysctls=(
            ("ipv4/conf/all/arp_ignore", "1"),
            ("ipv4/ip_unprivileged_port_start", "0"),
        ),
        rename_pod_link=True,
        stand_in_mac=source.mac,
        stand_in_addresses=source.ipv4(),
        stand_in_routes=routes,
    )


def _lease_routes(facts: PodFacts, device: str) -> tuple[str, tuple[StaticRoute, ...]]:
    """(gateway, classless routes) of the pod's IPv4 routes on `device`, default last.

    Upstream offers the non-local routes: on-link ones (no gateway) are the connected
    subnet and are dropped; the gateway is the default route's next hop.
    """
    on_device = [r for r in facts.routes if r.device == device and r.gateway]
    default = [r for r in on_device if r.destination == "0.0.0.0/0"]
    others = [r for r in on_device if r.destination != "0.0.0.0/0"]
    gateway = default[0].gateway if default else ""
    routes = tuple(StaticRoute(r.destination, r.gateway) for r in [*others, *default])
    return gateway, routes


def pod_network(plan: InterfacePlan, facts: PodFacts) -> PodNetwork:
    """The launcher's view of this interface, from the facts as discovered *before* setup.

    For bridge binding after an earlier run, the stand-in `eth0` holds the pod's MAC,
    addresses and routes, so a restarted handler produces the same value.
    """
    if plan.binding is None:
        raise NetworkPlanError(f"interface {plan.interface} is not on the pod network")
    pod = _pod_link(facts, plan)
    if plan.binding is Binding.MASQUERADE:
        gateway, guest, prefix = vm_addresses(plan.vm_cidr)
        return PodNetwork(
            interface=plan.interface,
            binding=plan.binding,
            tap=plan.tap,
            bridge=POD_BRIDGE,
            mac=plan.mac or pod.mac,
            mtu=pod.mtu,
            lease=DhcpLease(
                server_ip=gateway, guest_ip=guest, prefix_length=prefix, gateway=gateway
            ),
            pod_ips=pod.global_ips(),
        )
    source = _stand_in(facts) or pod
    ipv4 = source.ipv4()
    lease = None
    if ipv4:
        gateway, routes = _lease_routes(facts, source.name)
        lease = DhcpLease(
            server_ip=bridge_fake_ip(plan.index),
            guest_ip=ipv4[0].address,
            prefix_length=ipv4[0].prefix_length,
            gateway=gateway,
            routes=routes,
            match_mac=True,
        )
    return PodNetwork(
        interface=plan.interface,
        binding=plan.binding,
        tap=plan.tap,
        bridge=POD_BRIDGE,
        mac=plan.mac or source.mac,
        mtu=source.mtu,
        lease=lease,
        # Upstream drops IPv6 for bridge binding: the guest gets no IPv6, none is reported.
        pod_ips=tuple(a.address for a in ipv4),
    )
