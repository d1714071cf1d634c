"""CNI for one node: a Linux bridge with host-local IPAM and portmap, without masquerade.

Pods get routes only to cluster addresses (pod CIDR, service CIDR, the host address), not
a default route: a pod's packet for anywhere else fails at once inside the pod and never
reaches this host's uplink. The node's blackhole route for its subnet catches anything
the bridge route does not.
"""

from __future__ import annotations

import json
from typing import Any

from kv_cluster.config import ClusterConfig
from kv_cluster.nodes import NodeSpec

__all__ = ["CNI_VERSION", "conflist_text", "render_cni_conflist"]

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
