"""Private clusters beside the default one, in one table so that no two collide.

A test tier or benchmark that needs a control plane of its own (it installs KubeVirt's
parts itself, plays a controller, or creates Nodes) takes a named slot: its state dir
under ``$XDG_STATE_HOME/kubevirt-py/<name>``, a port base, a host address and the two
address ranges the cluster blackholes. ``KV_<PREFIX>_PORT_BASE`` and
``KV_<PREFIX>_HOST_IP`` move a slot when something else on the machine holds it (helpers
working side by side give each run its own).
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass

from kv_cluster.config import (
    DEFAULT_HOST_IP,
    DEFAULT_POD_CIDR,
    DEFAULT_PORT_BASE,
    DEFAULT_SERVICE_CIDR,
    default_state_dir,
)

__all__ = ["PORT_SPAN", "SLOTS", "Slot", "private_env"]

#: Ports a cluster uses from its base: control plane, node, KubeVirt (kv_cluster.config.Ports).
PORT_SPAN = 30


@dataclass(frozen=True)
class Slot:
    """One private cluster's place on this host."""

    name: str
    prefix: str
    port_base: int
    host_ip: str
    service_cidr: str
    pod_cidr: str

    def ports(self) -> range:
        return range(self.port_base, self.port_base + PORT_SPAN)

    def networks(self) -> tuple[ipaddress.IPv4Network, ipaddress.IPv4Network]:
        return ipaddress.IPv4Network(self.service_cidr), ipaddress.IPv4Network(self.pod_cidr)


_DEFAULT = Slot(
    "cluster", "CLUSTER", DEFAULT_PORT_BASE, DEFAULT_HOST_IP, DEFAULT_SERVICE_CIDR, DEFAULT_POD_CIDR
)
SLOTS: dict[str, Slot] = {
    s.name: s
    for s in (
        _DEFAULT,
        Slot("kube-runtime", "RUNTIME", 26700, "10.95.0.7", "10.97.0.0/16", "10.245.0.0/16"),
        Slot("drain", "DRAIN", 26750, "10.95.0.13", "10.103.0.0/16", "10.253.0.0/16"),
        Slot("virt-controller", "CONTROLLER", 26800, "10.95.0.8", "10.98.0.0/16", "10.246.0.0/16"),
        Slot(
            "controller-bench",
            "CONTROLLER_BENCH",
            26850,
            "10.95.0.9",
            "10.99.0.0/16",
            "10.247.0.0/16",
        ),
        Slot("virt-operator", "OPERATOR", 26900, "10.95.0.10", "10.101.0.0/16", "10.249.0.0/16"),
        Slot("security", "SECURITY", 26950, "10.95.0.11", "10.102.0.0/16", "10.252.0.0/16"),
        Slot("schema-fuzz", "SCHEMA_FUZZ", 27400, "10.95.0.25", "10.104.0.0/16", "10.254.0.0/16"),
        Slot("lifecycle", "LIFECYCLE", 27900, "10.95.0.31", "10.105.0.0/16", "10.255.0.0/16"),
        Slot("fault-recovery", "FAULTS", 27940, "10.95.0.32", "10.100.0.0/16", "10.248.0.0/16"),
        Slot("registry-test", "REGISTRY", 27980, "10.95.0.33", "10.106.0.0/16", "10.251.0.0/16"),
    )
}


def private_env(
    name: str, *, kube_proxy: bool = True, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The KV_CLUSTER_* settings of slot `name` (KV_<PREFIX>_PORT_BASE/_HOST_IP win).

    `kube_proxy=False`: the nodes such a cluster may have run without kube-proxy, whose
    host-wide chains belong to the default cluster."""
    environ = os.environ if environ is None else environ
    slot = SLOTS[name]
    env = {
        # Beside the default cluster's state dir (…/kubevirt-py/cluster).
        "KV_CLUSTER_STATE_DIR": str(default_state_dir(environ).parent / slot.name),
        "KV_CLUSTER_PORT_BASE": environ.get(f"KV_{slot.prefix}_PORT_BASE", str(slot.port_base)),
        "KV_CLUSTER_HOST_IP": environ.get(f"KV_{slot.prefix}_HOST_IP", slot.host_ip),
        "KV_CLUSTER_SERVICE_CIDR": slot.service_cidr,
        "KV_CLUSTER_POD_CIDR": slot.pod_cidr,
    }
    if not kube_proxy:
        env["KV_CLUSTER_KUBE_PROXY"] = "0"
    return env
