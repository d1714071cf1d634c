"""Phase 1 of the pod network, run for real against network namespaces of our own.

The pod netns gets what virt-handler builds in a launcher pod (bridge, tap, sysctls,
nftables NAT; bridge binding's renamed NIC and stand-in eth0); a peer netns plays the pod
network and a guest netns, attached to the bridge by a veth (a tap needs QEMU to read
it), plays the guest. Traffic only between these namespaces.
"""

from __future__ import annotations

import asyncio
import grp
import pwd
import re
import socket
import threading
from collections.abc import Callable
from typing import Any

from kubevirt_api import VirtualMachineInstance, load
from virt_domain.podnetwork import Binding, DhcpLease, StaticRoute
from virt_handler.netplan import plan_interfaces
from virt_handler.network import setup_in_netns
from virt_launcher.dhcp import DhcpServers


def _vmi(interface: dict[str, Any], pod: dict[str, Any] | None = None) -> VirtualMachineInstance:
    return load(
        VirtualMachineInstance,
        {
            "apiVersion": "kubevirt.io/v1",
            "kind": "VirtualMachineInstance",
            "metadata": {"name": "vmi", "namespace": "default"},
            "spec": {
                "domain": {"devices": {"interfaces": [{"name": "default", **interface}]}},
                "networks": [{"name": "default", "pod": pod or {}}],
            },
        },
    )


_COUNTER_VALUES = re.compile(r"counter packets \d+ bytes \d+")


def _rules(ns: Any) -> list[str]:
    """`nft list ruleset`'s rule lines, counters' values dropped, as `chain: rule`."""
    out, chain = [], ""
    for line in ns.sh("nft", "list", "ruleset").splitlines():
        line = line.strip()
        if line.startswith("chain "):
            chain = line.split()[1]
        elif line and not line.startswith(("type ", "table ", "}", "#")):
            out.append(f"{chain}: {_COUNTER_VALUES.sub('counter', line)}")
    return out


def _names(uid: int, lookup: Callable[[int], Any]) -> set[str]:
    """How iproute2 may print an owner: the number, or its name on this host."""
    try:
        return {str(uid), lookup(uid)[0]}
    except KeyError:
        return {str(uid)}


def _serve(ns: Any, address: str, port: int, udp: bool = False) -> list[str]:
    """A listener in `ns` that answers one client with the source address it saw."""
    kind = socket.SOCK_DGRAM if udp else socket.SOCK_STREAM

    def bind() -> socket.socket:
        s = socket.socket(socket.AF_INET, kind)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((address, port))
        if not udp:
            s.listen(1)
        return s

    server = ns.run(bind)
    server.settimeout(10)
    seen: list[str] = []

    def answer() -> None:
        with server:
            try:
                if udp:
                    _, peer = server.recvfrom(64)
                    seen.append(peer[0])
                    server.sendto(peer[0].encode(), peer)
                    return
                conn, peer = server.accept()
            except TimeoutError:
                return  # nobody came: what a test of a refused port expects (`seen` stays empty)
            with conn:
                seen.append(peer[0])
                conn.sendall(peer[0].encode())

    threading.Thread(target=answer, daemon=True).start()
    return seen


def _ask(ns: Any, address: str, port: int, udp: bool = False) -> str:
    def call() -> str:
        kind = socket.SOCK_DGRAM if udp else socket.SOCK_STREAM
        with socket.socket(socket.AF_INET, kind) as s:
            s.settimeout(5)
            s.connect((address, port))
            if udp:
                s.send(b"hello")
                return s.recv(64).decode()
            return s.recv(64).decode()

    return ns.run(call)


def _refused(ns: Any, address: str, port: int) -> bool:
    try:
        _ask(ns, address, port)
    except ConnectionRefusedError:
        return True
    return False


def test_masquerade_builds_bridge_tap_sysctls_and_upstreams_nat(lab: Any) -> None:
    pod, _peer = lab.pod, lab.peer
    result = setup_in_netns(pod.path, plan_interfaces(_vmi({"masquerade": {}})))
    assert result.created == ["k6t-eth0", "tap0"]
    links = pod.links()
    bridge, tap = links["k6t-eth0"], links["tap0"]
    assert bridge["address"] == "02:00:00:00:00:00"
    assert bridge["mtu"] == tap["mtu"] == lab.pod_mtu
    addrs = pod.sh("ip", "-4", "-o", "addr", "show", "k6t-eth0")
    assert "inet 10.0.2.1/24" in addrs
    info = tap["linkinfo"]["info_data"]
    assert info["type"] == "tap"
    assert info["vnet_hdr"] is True
    assert info["pi"] is False
    assert str(info["user"]) in _names(107, pwd.getpwuid)
    assert str(info["group"]) in _names(107, grp.getgrgid)
    assert tap["master"] == "k6t-eth0"
    assert "UP" in tap["flags"]
    assert "UP" in bridge["flags"]
    assert pod.sysctl("ipv4/ip_forward") == "1"
    assert pod.sysctl("ipv4/conf/k6t-eth0/route_localnet") == "1"
    assert pod.sysctl("ipv4/ip_unprivileged_port_start") == "0"
    chains = {
        c["chain"]["name"]: (c["chain"].get("hook"), c["chain"].get("prio"))
        for c in pod.ruleset()
        if "chain" in c and c["chain"]["table"] == "nat"
    }
    assert chains == {
        "prerouting": ("prerouting", -100),
        "input": ("input", 100),
        "output": ("output", -100),
        "postrouting": ("postrouting", 100),
        "KUBEVIRT_PREINBOUND": (None, None),
        "KUBEVIRT_POSTINBOUND": (None, None),
    }
    assert sorted(_rules(pod)) == sorted(
        [
            'prerouting: iifname "eth0" counter jump KUBEVIRT_PREINBOUND',
            "output: ip daddr 127.0.0.1 counter dnat to 10.0.2.2",
            "postrouting: ip saddr 10.0.2.2 counter masquerade",
            'postrouting: oifname "k6t-eth0" counter jump KUBEVIRT_POSTINBOUND',
            "KUBEVIRT_PREINBOUND: counter dnat to 10.0.2.2",
            "KUBEVIRT_POSTINBOUND: ip saddr 127.0.0.1 counter snat to 10.0.2.1",
        ]
    )
    (network,) = result.networks
    assert network.binding is Binding.MASQUERADE
    assert network.tap == "tap0"
    assert (network.mac, network.mtu, network.pod_ips) == (lab.pod_mac, lab.pod_mtu, (lab.pod_ip,))
    assert network.lease == DhcpLease("10.0.2.1", "10.0.2.2", 24, "10.0.2.1")


def test_a_multiqueue_nic_gets_a_multi_queue_tap(lab: Any) -> None:
    """With networkInterfaceMultiqueue and 2 vCPUs QEMU opens the tap twice; a tap made
    without IFF_MULTI_QUEUE refuses the second open."""
    vmi = load(
        VirtualMachineInstance,
        {
            "metadata": {"name": "vmi", "namespace": "default"},
            "spec": {
                "domain": {
                    "cpu": {"cores": 2},
                    "devices": {
                        "networkInterfaceMultiqueue": True,
                        "interfaces": [{"name": "default", "masquerade": {}}],
                    },
                },
                "networks": [{"name": "default", "pod": {}}],
            },
        },
    )
    plans = plan_interfaces(vmi)
    assert [p.queues for p in plans] == [2]
    setup_in_netns(lab.pod.path, plans)
    info = lab.pod.links()["tap0"]["linkinfo"]["info_data"]
    assert info["multi_queue"] is True


def test_a_second_run_changes_nothing(lab: Any) -> None:
    pod, _peer = lab.pod, lab.peer
    plans = plan_interfaces(_vmi({"masquerade": {}, "ports": [{"port": 80}]}))
    first = setup_in_netns(pod.path, plans)
    links, rules = pod.links(), _rules(pod)
    again = setup_in_netns(pod.path, plans)
    assert again.created == []
    assert again.networks == first.networks
    assert _rules(pod) == rules
    assert pod.links().keys() == links.keys()
    assert pod.sh("ip", "-4", "-o", "addr", "show", "k6t-eth0").count("inet ") == 1


def test_inbound_reaches_the_guest_on_every_port_and_outbound_is_masqueraded(lab: Any) -> None:
    pod, peer = lab.pod, lab.peer
    setup_in_netns(pod.path, plan_interfaces(_vmi({"masquerade": {}})))
    guest = lab.guest()
    guest.sh("ip", "addr", "add", "10.0.2.2/24", "dev", "eth0")
    guest.sh("ip", "route", "add", "default", "via", "10.0.2.1")
    for port in (8080, 2222):
        seen = _serve(guest, "10.0.2.2", port)
        # The guest sees the real client: inbound is DNAT only.
        assert _ask(peer, lab.pod_ip, port) == lab.peer_ip
        assert seen == [lab.peer_ip]
    seen = _serve(peer, lab.peer_ip, 9090)
    assert _ask(guest, lab.peer_ip, 9090) == lab.pod_ip  # outbound leaves as the pod
    assert seen == [lab.pod_ip]


def test_declared_ports_only_are_forwarded(lab: Any) -> None:
    pod, peer = lab.pod, lab.peer
    vmi = _vmi({"masquerade": {}, "ports": [{"port": 8080}, {"port": 5353, "protocol": "UDP"}]})
    setup_in_netns(pod.path, plan_interfaces(vmi))
    assert sorted(r for r in _rules(pod) if "dport" in r) == sorted(
        [
            "KUBEVIRT_PREINBOUND: tcp dport 8080 counter dnat to 10.0.2.2",
            "KUBEVIRT_PREINBOUND: udp dport 5353 counter dnat to 10.0.2.2",
            "KUBEVIRT_POSTINBOUND: tcp dport 8080 ip saddr 127.0.0.1 counter snat to 10.0.2.1",
            "KUBEVIRT_POSTINBOUND: udp dport 5353 ip saddr 127.0.0.1 counter snat to 10.0.2.1",
            "output: ip daddr 127.0.0.1 tcp dport 8080 counter dnat to 10.0.2.2",
            "output: ip daddr 127.0.0.1 udp dport 5353 counter dnat to 10.0.2.2",
        ]
    )
    guest = lab.guest()
    guest.sh("ip", "addr", "add", "10.0.2.2/24", "dev", "eth0")
    guest.sh("ip", "route", "add", "default", "via", "10.0.2.1")
    _serve(guest, "10.0.2.2", 8080)
    assert _ask(peer, lab.pod_ip, 8080) == lab.peer_ip
    _serve(guest, "10.0.2.2", 5353, udp=True)
    assert _ask(peer, lab.pod_ip, 5353, udp=True) == lab.peer_ip
    _serve(guest, "10.0.2.2", 8081)
    # Not declared: not forwarded, so the pod's own stack answers and refuses.
    assert _refused(peer, lab.pod_ip, 8081)


def test_a_custom_vm_cidr_moves_gateway_and_guest(lab: Any) -> None:
    pod, _peer = lab.pod, lab.peer
    vmi = _vmi({"masquerade": {}}, {"vmNetworkCIDR": "10.10.10.0/24"})
    (network,) = setup_in_netns(pod.path, plan_interfaces(vmi)).networks
    assert "inet 10.10.10.1/24" in pod.sh("ip", "-4", "-o", "addr", "show", "k6t-eth0")
    assert "KUBEVIRT_PREINBOUND: counter dnat to 10.10.10.2" in _rules(pod)
    assert network.lease == DhcpLease("10.10.10.1", "10.10.10.2", 24, "10.10.10.1")


def test_bridge_binding_hands_the_pod_address_to_the_guest(lab: Any) -> None:
    pod, peer = lab.pod, lab.peer
    plans = plan_interfaces(_vmi({"bridge": {}}))
    result = setup_in_netns(pod.path, plans)
    assert result.created == ["k6t-eth0", "eth0", "tap0"]
    links = pod.links()
    nic, stand_in, bridge = links["eth0-nic"], links["eth0"], links["k6t-eth0"]
    assert nic["linkinfo"]["info_kind"] == "veth"
    assert nic["master"] == "k6t-eth0"
    assert nic["linkinfo"]["info_slave_data"]["learning"] is False
    assert nic["address"] != lab.pod_mac
    assert nic["address"] == bridge["address"]
    assert pod.sh("ip", "-o", "addr", "show", "eth0-nic") == ""
    assert stand_in["linkinfo"]["info_kind"] == "ifb"
    assert (stand_in["address"], stand_in["mtu"]) == (lab.pod_mac, lab.pod_mtu)
    assert f"inet {lab.pod_ip}/24" in pod.sh("ip", "-4", "-o", "addr", "show", "eth0")
    assert f"default via {lab.peer_ip} dev eth0" in pod.sh("ip", "route")
    assert "inet 169.254.75.10/32" in pod.sh("ip", "-4", "-o", "addr", "show", "k6t-eth0")
    assert links["tap0"]["master"] == "k6t-eth0"
    assert pod.sysctl("ipv4/conf/all/arp_ignore") == "1"
    assert _rules(pod) == []  # no NAT for bridge binding
    (network,) = result.networks
    assert network.binding is Binding.BRIDGE
    assert (network.mac, network.mtu, network.pod_ips) == (lab.pod_mac, lab.pod_mtu, (lab.pod_ip,))
    assert network.lease == DhcpLease(
        "169.254.75.10", lab.pod_ip, 24, lab.peer_ip, (StaticRoute("0.0.0.0/0", lab.peer_ip),), True
    )
    # A restarted handler finds it all done and reports the same lease.
    again = setup_in_netns(pod.path, plans)
    assert again.created == []
    assert again.networks == result.networks
    assert pod.links().keys() == links.keys()
    # The guest, with the pod's MAC and address, is reached from the pod network.
    guest = lab.guest(mac=lab.pod_mac)
    guest.sh("ip", "addr", "add", f"{lab.pod_ip}/24", "dev", "eth0")
    seen = _serve(guest, lab.pod_ip, 8080)
    assert _ask(peer, lab.pod_ip, 8080) == lab.peer_ip
    assert seen == [lab.peer_ip]


def test_phase_ones_networks_drive_the_launchers_dhcp_to_the_guest(lab: Any, tmp_path: Any) -> None:
    """Phase 1 for real, then the launcher's DHCP server on the bridge it made (in a thread
    of the pod's netns; its uid-107 run is test_dhcp_lease.py's), then udhcpc in the guest."""
    vmi = _vmi({"masquerade": {}})
    (network,) = setup_in_netns(lab.pod.path, plan_interfaces(vmi)).networks
    guest = lab.guest(mac=lab.pod_mac)
    resolv = tmp_path / "resolv.conf"
    resolv.write_text("search default.svc.cluster.local\nnameserver 10.96.0.10\n")
    serving, stop = threading.Event(), threading.Event()

    def serve() -> None:
        async def run() -> None:
            servers = DhcpServers(resolv_conf=resolv)
            await servers.ensure(vmi, [network])
            serving.set()
            await asyncio.to_thread(stop.wait, 30)
            servers.close()

        asyncio.run(run())

    server = threading.Thread(target=lambda: lab.pod.run(serve), daemon=True)
    server.start()
    try:
        assert serving.wait(10), "the DHCP server did not start"
        out = tmp_path / "lease.env"
        script = tmp_path / "udhcpc.sh"
        script.write_text(f'#!/bin/sh\n[ "$1" = bound ] && env > {out}\nexit 0\n')
        script.chmod(0o755)
        guest.sh("busybox", "udhcpc", "-i", "eth0", "-q", "-n", "-f", "-t", "5", "-T", "1",
                 "-s", str(script), "-O", "mtu")  # fmt: skip
        lease = dict(line.split("=", 1) for line in out.read_text().splitlines() if "=" in line)
    finally:
        stop.set()
        server.join(10)
    assert (lease["ip"], lease["router"], lease["serverid"]) == ("10.0.2.2", "10.0.2.1", "10.0.2.1")
    assert (lease["mtu"], lease["dns"].strip()) == (str(lab.pod_mtu), "10.96.0.10")
