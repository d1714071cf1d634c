"""The local cluster's worker nodes: names, addresses, files and their components.

Every node runs its own containerd and kubelet with private state under
`<state>/nodes/<name>/`, and its own CNI bridge with a /24 of the pod CIDR. All nodes share
this host's network namespace, so one kube-proxy and one DNS server serve them all.

```
<state>/nodes/nodes.json              how many nodes `up` was asked for
<state>/nodes/<name>/containerd/      config.toml, containerd.sock, root/, state/
<state>/nodes/<name>/cni/             net.d/ (the bridge conflist), ipam/ (host-local leases)
<state>/nodes/<name>/kubelet/         config.yaml, kubeconfig, pki/, root/ (pods, volumes)
```
"""

from __future__ import annotations

import ipaddress
import json
from dataclasses import dataclass
from pathlib import Path

from kv_cluster.config import ClusterConfig, ConfigError
from kv_cluster.layout import StateLayout

__all__ = ["MAX_NODES", "NodeSpec", "node_specs", "read_node_count", "write_node_count"]

MAX_NODES = 4  # node port offsets 2..9 hold two ports per node
_UNIX_PATH_MAX = 107


@dataclass(frozen=True)
class NodeSpec:
    """One node: index, name, pod subnet, bridge and paths."""

    index: int
    name: str
    pod_subnet: str
    bridge: str
    root: Path

    @property
    def containerd_dir(self) -> Path:
        return self.root / "containerd"

    @property
    def containerd_socket(self) -> Path:
        return self.containerd_dir / "containerd.sock"

    @property
    def cni_dir(self) -> Path:
        return self.root / "cni"

    @property
    def kubelet_dir(self) -> Path:
        return self.root / "kubelet"

    @property
    def kubelet_root(self) -> Path:
        """The kubelet's --root-dir: pods/<uid>/volumes/... live here (not /var/lib/kubelet)."""
        return self.kubelet_dir / "root"

    @property
    def gateway(self) -> str:
        return str(next(ipaddress.ip_network(self.pod_subnet).hosts()))


def _subnet(pod_cidr: str, index: int) -> str:
    net = ipaddress.ip_network(pod_cidr)
    if net.prefixlen > 24:
        raise ConfigError(
            f"KV_CLUSTER_POD_CIDR={pod_cidr} must be /24 or larger to hold node subnets"
        )
    return str(list(net.subnets(new_prefix=24))[index]) if index < 2 ** (24 - net.prefixlen) else ""


def node_specs(config: ClusterConfig, layout: StateLayout, count: int) -> list[NodeSpec]:
    """The first `count` nodes of this cluster; raises ConfigError when they cannot fit."""
    if not 1 <= count <= MAX_NODES:
        raise ConfigError(f"--nodes must be within 1..{MAX_NODES}, not {count}")
    specs = []
    for index in range(count):
        name = f"kv-node-{index}"
        subnet = _subnet(config.pod_cidr, index)
        if not subnet:
            raise ConfigError(f"KV_CLUSTER_POD_CIDR={config.pod_cidr} has no /24 for node {index}")
        spec = NodeSpec(
            index=index,
            name=name,
            pod_subnet=subnet,
            # Unique per cluster (port base) and node; Linux allows 15 characters.
            bridge=f"kv{config.ports.base}n{index}",
            root=layout.root / "nodes" / name,
        )
        if len(str(spec.containerd_socket) + ".ttrpc") > _UNIX_PATH_MAX:
            raise ConfigError(
                f"KV_CLUSTER_STATE_DIR={config.state_dir} is too long: the node socket "
                f"{spec.containerd_socket} exceeds {_UNIX_PATH_MAX} bytes"
            )
        specs.append(spec)
    return specs


def _count_file(layout: StateLayout) -> Path:
    return layout.root / "nodes" / "nodes.json"


def read_node_count(layout: StateLayout) -> int:
    """How many nodes this cluster runs (0 before the first `up`)."""
    try:
        raw = json.loads(_count_file(layout).read_text())
        return int(raw["count"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0


def write_node_count(layout: StateLayout, count: int) -> None:
    path = _count_file(layout)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"count": count}) + "\n")
    tmp.replace(path)
