"""Phase 1 of a VMI's pod network, applied in the launcher pod's netns (upstream `NetPod.Setup`).

A short-lived thread joins the pod's network namespace (found through a process whose
cgroup names the pod uid), reads the pod's links, addresses and routes
(:class:`~virt_handler.netplan.PodFacts`), lets `netplan` decide, and applies it: links and
addresses through rtnetlink (`rtnetlink.py`), taps through /dev/net/tun, sysctls through
/proc/sys/net (per netns, so the thread's), and the NAT through libnftables (`nftables.py`).
Every step looks before it acts, so a second run (a restarted handler) changes nothing.
The handler's image needs no `ip`, `nft` or `nsenter`; it needs `libnftables1`.
"""

from __future__ import annotations

import asyncio
import ctypes
import fcntl
import ipaddress
import os
import struct
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kubevirt_api import VirtualMachineInstance
from virt_domain import launcher_pod
from virt_domain.podnetwork import PodNetwork

from . import nftables
from .netplan import (
    POD_IFACE,
    RENAMED_POD_IFACE,
    InterfacePlan,
    LinkPlan,
    NetworkPlanError,
    PodAddress,
    PodFacts,
    PodLink,
    PodRoute,
    link_plan,
    plan_interfaces,
    pod_network,
)
from .podfiles import PodUid
from .procs import find_pod_process
from .rtnetlink import Netlink

__all__ = [
    "NetworkSetupError",
    "SetupResult",
    "discover",
    "find_pod_netns",
    "setup_in_netns",
    "setup_pod_network",
]

LAUNCHER_UID = launcher_pod.LAUNCHER_UID
_STAND_IN_KIND = "ifb"  # upstream uses a dummy link; this kernel has no dummy type


class NetworkSetupError(Exception):
    """The pod's network namespace or a device in it could not be prepared."""


@dataclass(frozen=True)
class SetupResult:
    """What a setup pass created now (names), and the launcher's view of each pod interface."""

    created: list[str] = field(default_factory=list)
    networks: tuple[PodNetwork, ...] = ()


def find_pod_netns(pod: PodUid, proc: str = "/proc") -> str:
    """`/proc/<pid>/ns/net` of a process of the pod."""
    pid = find_pod_process(pod, proc=proc)
    if pid is not None:
        return f"{proc}/{pid}/ns/net"
    raise NetworkSetupError(f"no process of pod {pod} found (is its sandbox running?)")


_LIBC = ctypes.CDLL(None, use_errno=True)
_CLONE_NEWNET = 0x40000000
_TUNSETIFF = 0x400454CA
_TUNSETPERSIST = 0x400454CB
_TUNSETOWNER = 0x400454CC
_TUNSETGROUP = 0x400454CE
_IFF_TAP = 0x0002
_IFF_NO_PI = 0x1000
_IFF_VNET_HDR = 0x4000
_IFF_MULTI_QUEUE = 0x0100


def _make_tap(name: str, queues: int = 1) -> None:
    """A persistent tap with a vnet header, owned by the launcher's uid (QEMU opens it),
    multi-queue when the NIC has more than one queue (QEMU opens it once per queue)."""
    flags = _IFF_TAP | _IFF_NO_PI | _IFF_VNET_HDR | (_IFF_MULTI_QUEUE if queues > 1 else 0)
    request = struct.pack("16sH", name.encode(), flags)
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_CLOEXEC)
    try:
        fcntl.ioctl(fd, _TUNSETIFF, request.ljust(40, b"\0"))
        fcntl.ioctl(fd, _TUNSETOWNER, LAUNCHER_UID)
        fcntl.ioctl(fd, _TUNSETGROUP, LAUNCHER_UID)
        fcntl.ioctl(fd, _TUNSETPERSIST, 1)
    finally:
        os.close(fd)


def discover(nl: Netlink) -> PodFacts:
    """The netns's links (with addresses and bridge master) and main-table IPv4 routes."""
    links = nl.links()
    names = {link.index: link.name for link in links}
    addresses: dict[int, list[PodAddress]] = {}
    for a in nl.addresses():
        addresses.setdefault(a.index, []).append(PodAddress(a.address, a.prefix_length))
    return PodFacts(
        links=tuple(
            PodLink(
                name=link.name,
                index=link.index,
                mac=link.mac,
                mtu=link.mtu,
                kind=link.kind,
                master=names.get(link.master, ""),
                addresses=tuple(addresses.get(link.index, ())),
            )
            for link in links
        ),
        routes=tuple(
            PodRoute(f"{r.destination}/{r.prefix_length}", r.gateway, names.get(r.index, ""))
            for r in nl.routes()
        ),
    )


def _write_sysctl(path: str, value: str) -> None:
    # /proc/sys/net/ resolves against the opening thread's netns: the pod's here.
    with open(f"/proc/sys/net/{path}", "w") as f:
        f.write(value)


def _index(nl: Netlink, name: str) -> int:
    for link in nl.links():
        if link.name == name:
            return link.index
    raise NetworkSetupError(f"link {name} vanished during setup")


def _ensure_bridge(nl: Netlink, facts: PodFacts, plan: LinkPlan, created: list[str]) -> int:
    if facts.link(plan.bridge) is None:
        nl.add_link(plan.bridge, "bridge", mac=plan.bridge_mac, mtu=plan.mtu)
        created.append(plan.bridge)
    index = _index(nl, plan.bridge)
    address, prefix = plan.bridge_address.split("/")
    nl.add_address(index, address, int(prefix))
    return index


def _ensure_tap(
    nl: Netlink, facts: PodFacts, plan: LinkPlan, bridge: int, created: list[str], queues: int
) -> None:
    if facts.link(plan.tap) is None:
        _make_tap(plan.tap, queues)
        created.append(plan.tap)
    nl.set_link(_index(nl, plan.tap), mtu=plan.mtu, master=bridge, up=True)


def _bridge_pod_link(nl: Netlink, facts: PodFacts, plan: LinkPlan, bridge: int) -> None:
    """Bridge binding: eth0 → eth0-nic (no addresses, bridge's MAC, a port without learning)."""
    renamed = facts.link(RENAMED_POD_IFACE)
    if renamed is None:
        pod = facts.link(POD_IFACE)
        if pod is None:
            raise NetworkSetupError(f"the pod has no {POD_IFACE}")
        nl.set_link(pod.index, up=False)
        for a in pod.addresses:
            nl.delete_address(pod.index, a.address, a.prefix_length)
        bridge_mac = next(link.mac for link in nl.links() if link.index == bridge)
        # The guest takes the pod's MAC: the port must not keep it, or the bridge would
        # think the guest's frames are its own.
        nl.set_link(bridge, mac=bridge_mac)
        nl.set_link(pod.index, name=RENAMED_POD_IFACE, mac=bridge_mac)
        index = pod.index
    else:
        index = renamed.index
    if os.path.exists(f"/proc/sys/net/ipv6/conf/{RENAMED_POD_IFACE}"):
        # A bridge port needs no address; without this it would grow a new link-local.
        _write_sysctl(f"ipv6/conf/{RENAMED_POD_IFACE}/disable_ipv6", "1")
    nl.set_link(index, master=bridge, up=True)
    nl.set_bridge_port_learning(index, False)


def _stand_in(nl: Netlink, facts: PodFacts, plan: LinkPlan, created: list[str]) -> None:
    """A link named eth0 that keeps the pod's MAC, MTU, addresses and routes."""
    current = facts.link(POD_IFACE)
    if current is None:
        nl.add_link(POD_IFACE, _STAND_IN_KIND, mac=plan.stand_in_mac, mtu=plan.mtu)
        created.append(POD_IFACE)
    index = _index(nl, POD_IFACE)
    nl.set_link(index, up=True)
    for a in plan.stand_in_addresses:
        nl.add_address(index, a.address, a.prefix_length)
    on_link = {a.cidr for a in plan.stand_in_addresses}
    for route in sorted(plan.stand_in_routes, key=lambda r: bool(r.gateway)):  # on-link first
        destination, prefix = route.destination.split("/")
        if _connected(route, on_link):
            continue  # the kernel made it with the address
        nl.add_route(destination, int(prefix), route.gateway, index)


def _connected(route: PodRoute, addresses: set[str]) -> bool:
    if route.gateway:
        return False
    network = ipaddress.ip_network(route.destination)
    return any(ipaddress.ip_interface(a).network == network for a in addresses)


def _apply(nl: Netlink, facts: PodFacts, iface: InterfacePlan) -> list[str]:
    created: list[str] = []
    if iface.binding is None:  # not on the pod network: a tap only
        if facts.link(iface.tap) is None:
            _make_tap(iface.tap, iface.queues)
            created.append(iface.tap)
        nl.set_link(_index(nl, iface.tap), up=True)
        return created
    plan = link_plan(iface, facts)
    bridge = _ensure_bridge(nl, facts, plan, created)
    if plan.rename_pod_link:
        _bridge_pod_link(nl, facts, plan, bridge)
        _stand_in(nl, discover(nl), plan, created)
    _ensure_tap(nl, facts, plan, bridge, created, iface.queues)
    nl.set_link(bridge, up=True)
    for path, value in plan.sysctls:
        _write_sysctl(path, value)
    if plan.nat is not None:
        nftables.run(plan.nat)
    return created


def _setup_here(interfaces: Sequence[InterfacePlan]) -> SetupResult:
    """Runs in a thread that has joined the pod's netns."""
    created: list[str] = []
    networks: list[PodNetwork] = []
    with Netlink() as nl:
        facts = discover(nl)
        for iface in interfaces:
            if iface.binding is not None:
                networks.append(pod_network(iface, facts))
            created += _apply(nl, facts, iface)
            facts = discover(nl)
    return SetupResult(created, tuple(networks))


def setup_in_netns(netns: str, interfaces: Sequence[InterfacePlan]) -> SetupResult:
    """Set `interfaces` up inside the network namespace at `netns` (a path); idempotent.

    A fresh thread joins the namespace (a netns is per thread) and ends afterwards, so no
    pooled thread is ever left in a pod's namespace. Raises NetworkSetupError.
    """
    result: list[SetupResult] = []
    failure: list[BaseException] = []

    def work() -> None:
        try:
            fd = os.open(netns, os.O_RDONLY | os.O_CLOEXEC)
            try:
                if _LIBC.setns(fd, _CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), f"setns({netns})")
            finally:
                os.close(fd)
            result.append(_setup_here(interfaces))
        except BaseException as error:  # reported to the caller below
            failure.append(error)

    thread = threading.Thread(target=work, name="pod-netns")
    thread.start()
    thread.join()
    if failure:
        raise NetworkSetupError(f"pod network in {netns}: {failure[0]}") from failure[0]
    return result[0]


def _setup(pod: PodUid, interfaces: Sequence[InterfacePlan]) -> SetupResult:
    return setup_in_netns(find_pod_netns(pod), interfaces)


async def setup_pod_network(
    pod: PodUid, vmi: VirtualMachineInstance, tap_devices: Mapping[str, str] | None = None
) -> SetupResult:
    """Phase 1 for every interface of the VMI in its pod's netns; idempotent.

    Raises NetworkSetupError (also for a VMI whose interfaces cannot be planned).
    """
    try:
        interfaces = plan_interfaces(vmi, tap_devices)
    except NetworkPlanError as error:
        raise NetworkSetupError(str(error)) from None
    if not interfaces:
        return SetupResult()  # no NIC: nothing to do in the pod's netns
    return await asyncio.to_thread(_setup, pod, interfaces)
