"""Fixtures for the network tier: network namespaces of our own, joined like a pod's.

No `ip netns add` (it bind-mounts /run/netns, which has left pods stuck on this kind of
host): each namespace is held by a `unshare --net sleep` child and addressed as
`/proc/<pid>/ns/net`; killing the holder frees it. A "pod" namespace gets `eth0`, one end
of a veth pair whose other end `peer0` sits in a "peer" namespace that plays the pod
network (the node side, 10.244.7.1). Traffic stays between these namespaces.
Needs root, iproute2, nftables' `nft` (to read the ruleset back independently) and
busybox (the guest's udhcpc).
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

import pytest

T = TypeVar("T")
_LIBC = ctypes.CDLL(None, use_errno=True)
_CLONE_NEWNET = 0x40000000

POD_IP = "10.244.7.5"
PEER_IP = "10.244.7.1"
POD_MAC = "0a:58:0a:f4:07:05"
POD_MTU = 1450


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    missing = [t for t in ("ip", "nft", "nsenter", "unshare", "busybox") if shutil.which(t) is None]
    reason = ""
    if os.geteuid() != 0:
        reason = "needs root (network namespaces, nftables)"
    elif missing:
        reason = f"needs {', '.join(missing)} (`make setup`: tools/host-packages.txt)"
    for item in items:
        if reason and "integration/network" in str(item.path):
            item.add_marker(pytest.mark.skip(reason=reason))


@dataclass
class Netns:
    """A network namespace held by a sleeping child process."""

    holder: subprocess.Popen[bytes]

    @property
    def path(self) -> str:
        return f"/proc/{self.holder.pid}/ns/net"

    def sh(self, *argv: str, check: bool = True) -> str:
        """Run a command inside the namespace; its stdout."""
        proc = subprocess.run(
            ["nsenter", f"--net={self.path}", *argv], capture_output=True, text=True, check=False
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"{argv}: {proc.returncode} {proc.stderr.strip()}")
        return proc.stdout

    def links(self) -> dict[str, dict[str, object]]:
        return {link["ifname"]: link for link in json.loads(self.sh("ip", "-d", "-j", "link"))}

    def ruleset(self) -> list[dict[str, object]]:
        return list(json.loads(self.sh("nft", "-j", "list", "ruleset"))["nftables"])

    def sysctl(self, path: str) -> str:
        return self.sh("cat", f"/proc/sys/net/{path}").strip()

    def run(self, fn: Callable[[], T]) -> T:
        """Call `fn` in a thread that joined this namespace (sockets it makes live here)."""
        out: list[T] = []
        errors: list[BaseException] = []

        def work() -> None:
            try:
                fd = os.open(self.path, os.O_RDONLY)
                try:
                    if _LIBC.setns(fd, _CLONE_NEWNET) != 0:  # os.setns is 3.12+
                        raise OSError(ctypes.get_errno(), "setns")
                finally:
                    os.close(fd)
                out.append(fn())
            except BaseException as error:  # re-raised in the caller
                errors.append(error)

        thread = threading.Thread(target=work)
        thread.start()
        thread.join()
        if errors:
            raise errors[0]
        return out[0]


def _netns() -> Netns:
    holder = subprocess.Popen(["unshare", "--net", "sleep", "600"])
    # unshare execs sleep only after the namespace exists; wait for that exec.
    for _ in range(200):
        try:
            if os.readlink(f"/proc/{holder.pid}/exe").endswith("sleep"):
                break
        except OSError:
            pass
        threading.Event().wait(0.01)
    ns = Netns(holder)
    ns.sh("ip", "link", "set", "lo", "up")
    return ns


@pytest.fixture
def make_netns() -> Iterator[Callable[[], Netns]]:
    made: list[Netns] = []

    def make() -> Netns:
        ns = _netns()
        made.append(ns)
        return ns

    yield make
    for ns in made:
        ns.holder.kill()
        ns.holder.wait()


@pytest.fixture
def peer(make_netns: Callable[[], Netns]) -> Netns:
    return make_netns()


@pytest.fixture
def pod(make_netns: Callable[[], Netns], peer: Netns) -> Netns:
    """A pod-like netns: eth0 (veth to `peer`) with a pod IP, MAC, MTU and default route."""
    ns = make_netns()
    ns.sh(
        "ip", "link", "add", "eth0", "mtu", str(POD_MTU), "address", POD_MAC,
        "type", "veth", "peer", "name", "peer0", "mtu", str(POD_MTU),
        "netns", str(peer.holder.pid),
    )  # fmt: skip
    ns.sh("ip", "addr", "add", f"{POD_IP}/24", "dev", "eth0")
    ns.sh("ip", "link", "set", "eth0", "up")
    ns.sh("ip", "route", "add", "default", "via", PEER_IP)
    peer.sh("ip", "addr", "add", f"{PEER_IP}/24", "dev", "peer0")
    peer.sh("ip", "link", "set", "peer0", "up")
    return ns


@dataclass
class Lab:
    """The pod netns, its pod-network peer, and a maker of guest stand-ins."""

    pod: Netns
    peer: Netns
    make_netns: Callable[[], Netns]
    pod_ip: str = POD_IP
    peer_ip: str = PEER_IP
    pod_mac: str = POD_MAC
    pod_mtu: int = POD_MTU

    def guest(self, bridge: str = "k6t-eth0", mac: str = "") -> Netns:
        """A guest stand-in: a netns whose `eth0` is a veth into the pod's bridge.

        A tap needs a reader (QEMU); a veth end in the bridge carries the same frames.
        """
        guest = self.make_netns()
        _attach(self.pod, guest, bridge, mac)
        return guest


@pytest.fixture
def lab(pod: Netns, peer: Netns, make_netns: Callable[[], Netns]) -> Lab:
    return Lab(pod, peer, make_netns)


def _attach(pod: Netns, guest: Netns, bridge: str, mac: str) -> None:
    pod.sh("ip", "link", "add", "gport", "type", "veth", "peer", "name", "eth0",
           "netns", str(guest.holder.pid))  # fmt: skip
    pod.sh("ip", "link", "set", "gport", "master", bridge, "up")
    if mac:
        guest.sh("ip", "link", "set", "eth0", "address", mac)
    guest.sh("ip", "link", "set", "eth0", "up")
