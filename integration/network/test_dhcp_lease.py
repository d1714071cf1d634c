"""The launcher's DHCP server, unprivileged in a pod-like netns, leases to busybox's udhcpc.

Two network namespaces of our own (conftest's `make_netns`, no `ip netns add`): the
"pod" has the bridge k6t-eth0 as virt-handler's phase 1 leaves it, the "guest" has eth0,
a veth whose peer is a port of that bridge (a tap needs QEMU to read it; a veth carries the
same frames). The server runs as uid 107 without capabilities, as in the launcher pod,
with only `net.ipv4.ip_unprivileged_port_start=0` set in the pod's netns.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from virt_domain.podnetwork import Binding, DhcpLease, PodNetwork, StaticRoute

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make network namespaces"),
    pytest.mark.skipif(
        shutil.which("busybox") is None, reason="needs busybox (apt-get install busybox-static)"
    ),
]

LAUNCHER_UID = 107
GUEST_MAC = "02:00:00:aa:bb:01"
RESOLV_CONF = (
    "search default.svc.cluster.local svc.cluster.local cluster.local\n"
    "nameserver 10.96.0.10\n"
    "options ndots:5\n"
)
# What the server process runs: the launcher's DhcpServers, fed as the sync feeds it.
SERVER = """
import asyncio, json, sys
from kubevirt_api import VirtualMachineInstance, load
from virt_launcher.dhcp import DhcpServers
from virt_rpc import NetworkSetup, networks_from_wire

async def main():
    vmi, networks, resolv = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
    servers = DhcpServers(resolv_conf=__import__("pathlib").Path(resolv))
    decoded = networks_from_wire([NetworkSetup.parse(bytes.fromhex(networks))])
    await servers.ensure(load(VirtualMachineInstance, vmi), decoded)
    print("SERVING", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    servers.close()

asyncio.run(main())
"""


@dataclass
class DhcpRig:
    """The pod and guest namespaces, joined through k6t-eth0."""

    pod: Any  # conftest's Netns: a namespace held by a sleeping child
    guest: Any
    tmp: Path

    def serve(self, network: PodNetwork, vmi: dict[str, object]) -> subprocess.Popen[str]:
        """Start the DHCP server as uid 107 in the pod's netns; returns once it listens."""
        from virt_rpc import networks_to_wire

        (wire,) = networks_to_wire([network])
        resolv = self.tmp / "resolv.conf"
        resolv.write_text(RESOLV_CONF)
        resolv.chmod(0o644)
        site = next(p for p in sys.path if p.endswith("site-packages"))
        bootstrap = f"import site; site.addsitedir({site!r}); exec({SERVER!r})"
        python = f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"
        server = subprocess.Popen(
            ["nsenter", f"--net={self.pod.path}",
             "setpriv", f"--reuid={LAUNCHER_UID}", f"--regid={LAUNCHER_UID}", "--clear-groups",
             "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs",
             python, "-c", bootstrap, json.dumps(vmi), bytes(wire).hex(), str(resolv)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={"PATH": "/usr/bin:/bin"}, cwd="/",
        )  # fmt: skip
        assert server.stdout is not None
        seen = []  # its log lines, then SERVING once it listens
        while (line := server.stdout.readline()) and line.strip() != "SERVING":
            seen.append(line)
        if not line:
            server.kill()
            _, err = server.communicate()
            raise AssertionError(f"the DHCP server did not start: {''.join(seen)}{err}")
        self._servers.append(server)
        return server

    def lease(self, *extra: str, tries: int = 5) -> dict[str, str] | None:
        """Run udhcpc on the guest's eth0; the environment of its `bound` call, or None."""
        out = self.tmp / "lease.env"
        out.unlink(missing_ok=True)
        script = self.tmp / "udhcpc.sh"
        script.write_text(f'#!/bin/sh\n[ "$1" = bound ] && env > {out}\nexit 0\n')
        script.chmod(0o755)
        done = subprocess.run(
            ["nsenter", f"--net={self.guest.path}", "busybox", "udhcpc", "-i", "eth0",
             "-q", "-n", "-f", "-t", str(tries), "-T", "1", "-s", str(script), *extra],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        if done.returncode != 0 or not out.exists():
            return None
        return dict(line.split("=", 1) for line in out.read_text().splitlines() if "=" in line)

    _servers: list[subprocess.Popen[str]] = field(default_factory=list)


@pytest.fixture
def dhcp_rig(make_netns: Callable[[], Any]) -> Iterator[DhcpRig]:
    try:
        pwd.getpwuid(LAUNCHER_UID)
    except KeyError:
        pytest.fail(f"uid {LAUNCHER_UID} (the launcher's) has no account on this host")
    # pytest's tmp dirs are private to root; uid 107 reads resolv.conf from this one.
    tmp_path = Path(tempfile.mkdtemp(prefix="kv-dhcp-"))
    tmp_path.chmod(0o755)
    servers: list[subprocess.Popen[str]] = []
    try:
        pod, guest = make_netns(), make_netns()
        rig = DhcpRig(pod, guest, tmp_path, servers)
        pod.sh("ip", "link", "add", "k6t-eth0", "type", "bridge")
        pod.sh("ip", "link", "set", "k6t-eth0", "up")
        pod.sh("ip", "link", "add", "gport", "type", "veth", "peer", "name", "eth0",
               "netns", str(guest.holder.pid))  # fmt: skip
        pod.sh("ip", "link", "set", "gport", "master", "k6t-eth0", "up")
        guest.sh("ip", "link", "set", "eth0", "address", GUEST_MAC)
        guest.sh("ip", "link", "set", "eth0", "up")
        yield rig
    finally:
        for server in servers:
            server.kill()
            server.wait()
        shutil.rmtree(tmp_path, ignore_errors=True)


def _vmi(**spec: object) -> dict[str, object]:
    interface = spec.pop("interface", {"name": "default", "masquerade": {}})
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstance",
        "metadata": {"name": "testvm", "namespace": "default", "uid": "u-1"},
        "spec": {
            "domain": {"devices": {"interfaces": [interface]}},
            "networks": [{"name": "default", "pod": {}}],
            **spec,
        },
    }


MASQUERADE = PodNetwork(
    interface="default",
    binding=Binding.MASQUERADE,
    tap="tap0",
    bridge="k6t-eth0",
    mac=GUEST_MAC,
    mtu=1450,
    lease=DhcpLease("10.0.2.1", "10.0.2.2", 24, "10.0.2.1"),
)


def _phase_one_masquerade(pod: Any) -> None:
    pod.sh("ip", "addr", "add", "10.0.2.1/24", "dev", "k6t-eth0")
    pod.sh("sysctl", "-qw", "net.ipv4.ip_unprivileged_port_start=0")


def test_the_guest_gets_its_masquerade_lease_and_every_option(dhcp_rig: DhcpRig) -> None:
    _phase_one_masquerade(dhcp_rig.pod)
    interface = {
        "name": "default",
        "masquerade": {},
        "dhcpOptions": {
            "tftpServerName": "tftp.example",
            "bootFileName": "pxelinux.0",
            "ntpServers": ["127.0.0.3", "10.0.0.4"],
            "privateOptions": [{"option": 240, "value": "extra.options.kubevirt.io"}],
        },
    }
    dhcp_rig.serve(MASQUERADE, _vmi(interface=interface, subdomain="mysub"))

    lease = dhcp_rig.lease(
        "-O", "search", "-O", "mtu", "-O", "ntpsrv", "-O", "tftp", "-O", "bootfile", "-O", "240"
    )

    assert lease is not None, "no lease"
    assert lease["ip"] == "10.0.2.2"
    assert lease["subnet"] == "255.255.255.0"
    assert lease["router"] == "10.0.2.1"
    assert lease["serverid"] == "10.0.2.1"
    assert lease["dns"].split() == ["10.96.0.10"]
    assert lease["mtu"] == "1450"
    assert lease["lease"] == str(999 * 24 * 3600)
    assert lease["hostname"] == "testvm"
    assert lease["search"].split() == [
        "mysub.default.svc.cluster.local",
        "default.svc.cluster.local",
        "svc.cluster.local",
        "cluster.local",
    ]
    assert lease["domain"] == "mysub.default.svc.cluster.local"
    assert lease["ntpsrv"].split() == ["127.0.0.3", "10.0.0.4"]
    assert lease["tftp"] == "tftp.example"
    assert lease["bootfile"] == "pxelinux.0"
    assert bytes.fromhex(lease["opt240"]) == b"extra.options.kubevirt.io"


def test_bridge_binding_leases_the_pod_ip_to_the_guests_mac_only(dhcp_rig: DhcpRig) -> None:
    dhcp_rig.pod.sh("ip", "addr", "add", "169.254.75.10/32", "dev", "k6t-eth0")
    dhcp_rig.pod.sh("sysctl", "-qw", "net.ipv4.ip_unprivileged_port_start=0")
    bridge = PodNetwork(
        interface="default",
        binding=Binding.BRIDGE,
        tap="tap0",
        bridge="k6t-eth0",
        mac="0a:58:0a:f4:07:05",
        mtu=1500,
        lease=DhcpLease(
            "169.254.75.10",
            "10.244.7.5",
            24,
            "10.244.7.1",
            routes=(
                StaticRoute("0.0.0.0/0", "10.244.7.1"),
                StaticRoute("10.96.0.0/12", "10.244.7.1"),
            ),
            match_mac=True,
        ),
    )
    dhcp_rig.serve(bridge, _vmi(interface={"name": "default", "bridge": {}}))

    # The guest NIC still has another MAC: no answer.
    assert dhcp_rig.lease(tries=2) is None

    dhcp_rig.guest.sh("ip", "link", "set", "eth0", "address", "0a:58:0a:f4:07:05")
    lease = dhcp_rig.lease("-O", "staticroutes")
    assert lease is not None, "no lease for the guest's own MAC"
    assert (lease["ip"], lease["subnet"], lease["router"]) == (
        "10.244.7.5",
        "255.255.255.0",
        "10.244.7.1",
    )
    assert lease["serverid"] == "169.254.75.10"
    # Default route last, as upstream sends it.
    assert lease["staticroutes"].split() == [
        "10.96.0.0/12",
        "10.244.7.1",
        "0.0.0.0/0",
        "10.244.7.1",
    ]


def test_without_the_sysctl_an_unprivileged_server_says_what_is_missing(
    dhcp_rig: DhcpRig,
) -> None:
    dhcp_rig.pod.sh("ip", "addr", "add", "10.0.2.1/24", "dev", "k6t-eth0")
    with pytest.raises(AssertionError, match="ip_unprivileged_port_start=0"):
        dhcp_rig.serve(MASQUERADE, _vmi())
