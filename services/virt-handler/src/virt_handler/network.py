"""The privileged half of a VMI's pod network: tap devices in the launcher pod's netns.

The converter names each interface's host side `tap<index>` with `managed='no'`, so
the tap must exist before the launcher defines the domain, owned by the launcher's uid
(QEMU runs unprivileged). virt-handler creates it inside the pod's network namespace,
found through a process of the pod (its cgroup names the pod uid), and, for the pod
network, a bridge `k6t-<iface>` holding the tap with the guest-side gateway address
(masquerade's 10.0.2.1/24).

Not done yet (documented): NAT between the pod's eth0 and the guest, and a DHCP server
for the guest.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .podfiles import PodUid

__all__ = [
    "GATEWAY_CIDR",
    "NetworkSetupError",
    "PodInterface",
    "find_pod_netns",
    "pod_interfaces",
    "setup_pod_network",
]

GATEWAY_CIDR = "10.0.2.1/24"
LAUNCHER_UID = 107
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,15}$")


class NetworkSetupError(Exception):
    """The pod's network namespace or a device in it could not be prepared."""


@dataclass(frozen=True)
class PodInterface:
    """One VMI interface: its tap and, for the pod network, its bridge."""

    name: str
    tap: str
    bridge: str | None


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def pod_interfaces(vmi: Mapping[str, Any]) -> list[PodInterface]:
    """The taps the converter will name for this VMI (`tap<index>`), in spec order."""
    spec = _map(vmi.get("spec"))
    devices = _map(_map(spec.get("domain")).get("devices"))
    interfaces = [_map(i) for i in devices.get("interfaces") or ()]
    networks = {str(_map(n).get("name")): _map(n) for n in spec.get("networks") or ()}
    if not interfaces:
        if devices.get("autoattachPodInterface") is False:
            return []
        return [PodInterface("default", "tap0", "k6t-eth0")]
    out = []
    for index, iface in enumerate(interfaces):
        name = str(iface.get("name") or f"iface{index}")
        on_pod = "pod" in networks.get(name, {"pod": {}})
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


def _ip(netns: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        ["nsenter", f"--net={netns}", "ip", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=15,
    )
    if check and proc.returncode != 0:
        raise NetworkSetupError(f"ip {' '.join(args)}: {proc.stderr.strip()}")
    return proc


def _setup(pod: PodUid, interfaces: Sequence[PodInterface]) -> list[str]:
    netns = find_pod_netns(pod)
    done = []
    for iface in interfaces:
        for name in (iface.tap, iface.bridge):
            if name is not None and not _NAME.match(name):
                raise NetworkSetupError(f"device name {name!r} is not a valid Linux name")
        if _ip(netns, "link", "show", iface.tap, check=False).returncode != 0:
            _ip(
                netns,
                "tuntap",
                "add",
                "dev",
                iface.tap,
                "mode",
                "tap",
                "user",
                str(LAUNCHER_UID),
                "group",
                str(LAUNCHER_UID),
            )
            done.append(iface.tap)
        if iface.bridge is not None:
            if _ip(netns, "link", "show", iface.bridge, check=False).returncode != 0:
                _ip(netns, "link", "add", iface.bridge, "type", "bridge")
                _ip(netns, "addr", "add", GATEWAY_CIDR, "dev", iface.bridge)
                done.append(iface.bridge)
            _ip(netns, "link", "set", iface.tap, "master", iface.bridge)
            _ip(netns, "link", "set", iface.bridge, "up")
        _ip(netns, "link", "set", iface.tap, "up")
    return done


async def setup_pod_network(pod: PodUid, vmi: Mapping[str, Any]) -> list[str]:
    """Create the VMI's taps (and bridges) in the pod's netns; idempotent. Returns what
    was created now. Raises NetworkSetupError."""
    return await asyncio.to_thread(_setup, pod, pod_interfaces(vmi))
