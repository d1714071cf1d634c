"""The privileged half of a VMI's pod network: tap devices in the launcher pod's netns.

The converter names each interface's host side `tap<index>` with `managed='no'`, so
the tap must exist before the launcher defines the domain, owned by the launcher's uid
(QEMU runs unprivileged). virt-handler creates it inside the pod's network namespace,
found through a process of the pod (its cgroup names the pod uid), and, for the pod
network, a bridge `k6t-<iface>` holding the tap with the guest-side gateway address
(masquerade's 10.0.2.1/24). Plain ioctls from a thread that joined the netns: the
handler's image needs no `ip` or `nsenter`.

Not done yet (documented): NAT between the pod's eth0 and the guest, and a DHCP server
for the guest.
"""

from __future__ import annotations

import asyncio
import ctypes
import errno
import fcntl
import os
import re
import socket
import struct
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from kubevirt_api import VirtualMachineInstance
from virt_domain import launcher_pod

from .podfiles import PodUid

__all__ = [
    "GATEWAY_CIDR",
    "NetworkSetupError",
    "PodInterface",
    "find_pod_netns",
    "pod_interfaces",
    "setup_in_netns",
    "setup_pod_network",
]

GATEWAY_CIDR = "10.0.2.1/24"
LAUNCHER_UID = launcher_pod.LAUNCHER_UID
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,15}$")


class NetworkSetupError(Exception):
    """The pod's network namespace or a device in it could not be prepared."""


@dataclass(frozen=True)
class PodInterface:
    """One VMI interface: its tap and, for the pod network, its bridge."""

    name: str
    tap: str
    bridge: str | None


def pod_interfaces(vmi: VirtualMachineInstance) -> list[PodInterface]:
    """The taps the converter will name for this VMI (`tap<index>`), in spec order."""
    devices = vmi.spec.domain.devices
    interfaces = devices.interfaces or ()
    networks = {n.name: n for n in vmi.spec.networks or ()}
    if not interfaces:
        if devices.autoattach_pod_interface is False:
            return []
        return [PodInterface("default", "tap0", "k6t-eth0")]
    out = []
    for index, iface in enumerate(interfaces):
        name = iface.name or f"iface{index}"
        network = networks.get(name)
        # An interface without a network of its name is on the pod network, as before.
        on_pod = network is None or network.pod is not None
        out.append(PodInterface(name, f"tap{index}", f"k6t-eth{index}" if on_pod else None))
    return out


def find_pod_netns(pod: PodUid, proc: str = "/proc") -> str:
    """`/proc/<pid>/ns/net` of a process of the pod (cgroupfs paths carry `pod<uid>`)."""
    marks = (f"pod{pod}", f"pod{pod.replace('-', '_')}")
    for entry in os.listdir(proc):
        if not entry.isdigit():
            continue
        try:
            with open(f"{proc}/{entry}/cgroup") as f:
                cgroups = f.read()
        except OSError:
            continue
        if any(m in cgroups for m in marks):
            return f"{proc}/{entry}/ns/net"
    raise NetworkSetupError(f"no process of pod {pod} found (is its sandbox running?)")


_LIBC = ctypes.CDLL(None, use_errno=True)
_CLONE_NEWNET = 0x40000000
_TUNSETIFF = 0x400454CA
_TUNSETPERSIST = 0x400454CB
_TUNSETOWNER = 0x400454CC
_TUNSETGROUP = 0x400454CE
_IFF_TAP = 0x0002
_IFF_NO_PI = 0x1000
_IFF_UP = 0x1
_SIOCGIFINDEX = 0x8933
_SIOCGIFFLAGS = 0x8913
_SIOCSIFFLAGS = 0x8914
_SIOCSIFADDR = 0x8916
_SIOCSIFNETMASK = 0x891C
_SIOCBRADDBR = 0x89A0
_SIOCBRADDIF = 0x89A2


def _ifreq(name: str, payload: bytes = b"") -> bytes:
    return struct.pack("16s", name.encode()) + payload.ljust(24, b"\0")


def _exists(sock: socket.socket, name: str) -> bool:
    try:
        fcntl.ioctl(sock, _SIOCGIFINDEX, _ifreq(name))
    except OSError as error:
        if error.errno == errno.ENODEV:
            return False
        raise
    return True


def _index(sock: socket.socket, name: str) -> int:
    reply = fcntl.ioctl(sock, _SIOCGIFINDEX, _ifreq(name))
    return int(struct.unpack_from("i", reply, 16)[0])


def _up(sock: socket.socket, name: str) -> None:
    reply = fcntl.ioctl(sock, _SIOCGIFFLAGS, _ifreq(name))
    flags = struct.unpack_from("H", reply, 16)[0]
    fcntl.ioctl(sock, _SIOCSIFFLAGS, _ifreq(name, struct.pack("H", flags | _IFF_UP)))


def _sockaddr(address: str) -> bytes:
    return struct.pack("HH4s8x", socket.AF_INET, 0, socket.inet_aton(address))


def _make_tap(name: str) -> None:
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_CLOEXEC)
    try:
        fcntl.ioctl(fd, _TUNSETIFF, _ifreq(name, struct.pack("H", _IFF_TAP | _IFF_NO_PI)))
        fcntl.ioctl(fd, _TUNSETOWNER, LAUNCHER_UID)
        fcntl.ioctl(fd, _TUNSETGROUP, LAUNCHER_UID)
        fcntl.ioctl(fd, _TUNSETPERSIST, 1)
    finally:
        os.close(fd)


def _setup_here(interfaces: Sequence[PodInterface]) -> list[str]:
    """Runs in a thread that has joined the pod's netns; ioctls only, no tools needed."""
    done = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for iface in interfaces:
            if not _exists(sock, iface.tap):
                _make_tap(iface.tap)
                done.append(iface.tap)
            if iface.bridge is not None:
                if not _exists(sock, iface.bridge):
                    fcntl.ioctl(sock, _SIOCBRADDBR, iface.bridge.encode() + b"\0")
                    address, prefix = GATEWAY_CIDR.split("/")
                    mask = socket.inet_ntoa(
                        struct.pack("!I", (0xFFFFFFFF << (32 - int(prefix))) & 0xFFFFFFFF)
                    )
                    fcntl.ioctl(sock, _SIOCSIFADDR, _ifreq(iface.bridge, _sockaddr(address)))
                    fcntl.ioctl(sock, _SIOCSIFNETMASK, _ifreq(iface.bridge, _sockaddr(mask)))
                    done.append(iface.bridge)
                try:
                    fcntl.ioctl(
                        sock,
                        _SIOCBRADDIF,
                        _ifreq(iface.bridge, struct.pack("i", _index(sock, iface.tap))),
                    )
                except OSError as error:
                    if error.errno != errno.EBUSY:  # already a port of the bridge
                        raise
                _up(sock, iface.bridge)
            _up(sock, iface.tap)
    return done


def setup_in_netns(netns: str, interfaces: Sequence[PodInterface]) -> list[str]:
    """Create `interfaces` inside the network namespace at `netns` (a path).

    A fresh thread joins the namespace (a netns is per thread) and ends afterwards, so no
    pooled thread is ever left in a pod's namespace. Raises NetworkSetupError.
    """
    for iface in interfaces:
        for name in (iface.tap, iface.bridge):
            if name is not None and not _NAME.match(name):
                raise NetworkSetupError(f"device name {name!r} is not a valid Linux name")
    result: list[str] = []
    failure: list[BaseException] = []

    def work() -> None:
        try:
            fd = os.open(netns, os.O_RDONLY | os.O_CLOEXEC)
            try:
                if _LIBC.setns(fd, _CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), f"setns({netns})")
            finally:
                os.close(fd)
            result.extend(_setup_here(interfaces))
        except BaseException as error:  # reported to the caller below
            failure.append(error)

    thread = threading.Thread(target=work, name="pod-netns")
    thread.start()
    thread.join()
    if failure:
        raise NetworkSetupError(f"pod network in {netns}: {failure[0]}") from failure[0]
    return result


def _setup(pod: PodUid, interfaces: Sequence[PodInterface]) -> list[str]:
    return setup_in_netns(find_pod_netns(pod), interfaces)


async def setup_pod_network(pod: PodUid, vmi: VirtualMachineInstance) -> list[str]:
    """Create the VMI's taps (and bridges) in the pod's netns; idempotent. Returns what
    was created now. Raises NetworkSetupError."""
    return await asyncio.to_thread(_setup, pod, pod_interfaces(vmi))
