"""CNI for one node: a Linux bridge with host-local IPAM and portmap, without masquerade.

Pods get routes only to cluster addresses (pod CIDR, service CIDR, the host address), not
a default route: a pod's packet for anywhere else fails at once inside the pod and never
reaches this host's uplink. The node's blackhole route for its subnet catches anything
the bridge route does not.
"""

from __future__ import annotations

import ipaddress
import json
import shlex
import subprocess
from typing import Any

from kv_cluster.config import ClusterConfig
from kv_cluster.nodes import NodeSpec

__all__ = ["CNI_VERSION", "conflist_text", "remove_hostport_rules", "render_cni_conflist"]

CNI_VERSION = "0.4.0"


def render_cni_conflist(config: ClusterConfig, node: NodeSpec) -> dict[str, Any]:
    """The conflist containerd reads from `<node>/cni/net.d/10-kubevirt-py.conflist`."""
    routes = [
        {"dst": config.pod_cidr},
        {"dst": config.service_cidr},
        {"dst": f"{config.host_ip}/32"},
    ]
    return {
        "cniVersion": CNI_VERSION,
        "name": f"kubevirt-py-{node.name}",
        "plugins": [
            {
                "type": "bridge",
                "bridge": node.bridge,
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": node.pod_subnet, "gateway": node.gateway}]],
                    "routes": routes,
                    "dataDir": str(node.cni_dir / "ipam"),
                },
            },
            # hostPort on the host address only; snat so host-local clients are answered.
            {"type": "portmap", "capabilities": {"portMappings": True}, "snat": True},
        ],
    }


def conflist_text(config: ClusterConfig, node: NodeSpec) -> str:
    return json.dumps(render_cni_conflist(config, node), indent=2) + "\n"


def remove_hostport_rules(pod_subnet: str) -> list[str]:
    """Remove the portmap plugin's DNAT chains that lead into `pod_subnet`.

    Pods killed without a CNI DEL (containerd stopped under them) leave their hostPort
    rules behind, and those would capture the next cluster's traffic to the same host
    port."""
    subnet = ipaddress.ip_network(pod_subnet)
    rules = subprocess.run(
        ["iptables", "-t", "nat", "-S"], capture_output=True, text=True, check=False
    ).stdout.splitlines()
    parsed = [shlex.split(rule) for rule in rules]
    stale: set[str] = set()
    for parts in parsed:
        if parts[:1] == ["-A"] and parts[1].startswith("CNI-DN-") and "--to-destination" in parts:
            target = parts[parts.index("--to-destination") + 1].rsplit(":", 1)[0]
            if ipaddress.ip_address(target) in subnet:
                stale.add(parts[1])
    done: list[str] = []
    for chain in sorted(stale):
        for parts in parsed:
            if parts[:2] == ["-A", "CNI-HOSTPORT-DNAT"] and parts[-2:] == ["-j", chain]:
                subprocess.run(
                    ["iptables", "-t", "nat", "-D", *parts[1:]], capture_output=True, check=False
                )
        subprocess.run(["iptables", "-t", "nat", "-F", chain], capture_output=True, check=False)
        subprocess.run(["iptables", "-t", "nat", "-X", chain], capture_output=True, check=False)
        done.append(f"removed hostPort chain {chain}")
    return done
