"""The kubelet of one node: cgroupfs under a nested cgroup root, CRI to the node's containerd.

Identity: a client certificate `system:node:<name>` (O `system:nodes`) from the cluster CA,
so the Node authorizer and NodeRestriction apply; a serving certificate for the host
address, which the apiserver verifies (`--kubelet-certificate-authority`).
"""

from __future__ import annotations

import http.client
from pathlib import Path
from typing import Any

import yaml

from kv_cluster.components import ClusterContext, Component
from kv_cluster.health import Health
from kv_cluster.kubeconfig import write_kubeconfig
from kv_cluster.nodes import NodeSpec
from kv_cluster.plan import APISERVER, NODE, containerd_on, node_named

__all__ = ["Kubelet", "kubelet_ports", "render_kubelet_config"]


def kubelet_ports(ctx: ClusterContext, node: NodeSpec) -> tuple[int, int]:
    """(serving port, healthz port) of `node`'s kubelet."""
    ports = ctx.config.ports
    return ports.node(2 + 2 * node.index), ports.node(3 + 2 * node.index)


def render_kubelet_config(
    ctx: ClusterContext, node: NodeSpec, cgroup_root: str, serving: tuple[Path, Path]
) -> dict[str, Any]:
    """The KubeletConfiguration (kubelet.config.k8s.io/v1beta1) for `node`."""
    port, healthz = kubelet_ports(ctx, node)
    cert, key = serving
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": ctx.config.host_ip,
        "port": port,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": healthz,
        "tlsCertFile": str(cert),
        "tlsPrivateKeyFile": str(key),
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(ctx.credentials.ca.paths.cert)},
        },
        "authorization": {"mode": "Webhook"},
        "containerRuntimeEndpoint": f"unix://{node.containerd_socket}",
        "cgroupDriver": "cgroupfs",
        # This host is cgroup v1 (hybrid); kubelet >= 1.35 refuses it unless told.
        "failCgroupV1": False,
        "cgroupRoot": cgroup_root,
        "cgroupsPerQOS": True,
        "enforceNodeAllocatable": ["pods"],
        # No CAP_SYS_RESOURCE: a negative score for the kubelet itself is refused.
        "oomScoreAdj": 0,
        "failSwapOn": False,
        "clusterDomain": "cluster.local",
        "clusterDNS": [ctx.config.host_ip],
        "resolvConf": str(node.kubelet_dir / "resolv.conf"),
        "hairpinMode": "hairpin-veth",
        "maxPods": 110,
        "podCIDR": node.pod_subnet,
        "registerNode": True,
        "serializeImagePulls": False,
        "staticPodPath": "",
        # Images come from kv-images, not a registry: never garbage-collect them away.
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "2%",
            "imagefs.available": "2%",
        },
        "evictionPressureTransitionPeriod": "30s",
        "nodeStatusReportFrequency": "10s",
        "nodeStatusUpdateFrequency": "5s",
        "syncFrequency": "10s",
        "fileCheckFrequency": "10s",
        "volumeStatsAggPeriod": "30s",
        "shutdownGracePeriod": "0s",
        "rotateCertificates": False,
        "serverTLSBootstrap": False,
        "localStorageCapacityIsolation": True,
        "containerLogMaxSize": "10Mi",
        "containerLogMaxFiles": 3,
        "logging": {"format": "text", "verbosity": 1},
    }


class Kubelet(Component):
    """One node's kubelet."""

    startup_timeout = 60.0

    def __init__(self, ctx: ClusterContext, node: NodeSpec, cgroup_root: str) -> None:
        super().__init__(ctx)
        self.node = node
        self.cgroup_root = cgroup_root
        self.name = f"kubelet-{node.name}"
        self.requires = frozenset({APISERVER, containerd_on(node.name)})
        self.provides = frozenset({NODE, node_named(node.name)})

    @property
    def config_path(self) -> Path:
        return self.node.kubelet_dir / "config.yaml"

    @property
    def kubeconfig(self) -> Path:
        return self.node.kubelet_dir / "kubeconfig"

    def _credentials(self) -> tuple[Path, Path]:
        ca = self.ctx.credentials.ca
        pki = self.node.kubelet_dir / "pki"
        pki.mkdir(parents=True, exist_ok=True)
        pki.chmod(0o700)
        client = ca.issue(
            pki,
            "kubelet-client",
            f"system:node:{self.node.name}",
            organizations=["system:nodes"],
            client=True,
        )
        write_kubeconfig(
            self.kubeconfig,
            cluster=self.ctx.config.cluster_name,
            server=f"https://{self.ctx.config.host_ip}:{self.ctx.config.ports.apiserver}",
            ca=ca.paths.cert,
            user=f"system:node:{self.node.name}",
            client=client,
        )
        serving = ca.issue(
            pki,
            "kubelet-serving",
            f"system:node:{self.node.name}",
            organizations=["system:nodes"],
            server=True,
            dns_names=[self.node.name, "localhost"],
            ip_addresses=[self.ctx.config.host_ip, "127.0.0.1"],
        )
        return serving.cert, serving.key

    def prepare(self) -> None:
        d = self.node.kubelet_dir
        self.node.kubelet_root.mkdir(parents=True, exist_ok=True)
        serving = self._credentials()
        # Pods' resolv.conf: kubelet adds the cluster DNS server; no upstream resolvers.
        (d / "resolv.conf").write_text("# kubevirt-py: no upstream resolvers\n")
        config = render_kubelet_config(self.ctx, self.node, self.cgroup_root, serving)
        self.config_path.write_text(yaml.safe_dump(config, sort_keys=False))

    def argv(self) -> list[str]:
        return [
            str(self.ctx.kubernetes_bin / "kubelet"),
            f"--config={self.config_path}",
            f"--kubeconfig={self.kubeconfig}",
            f"--root-dir={self.node.kubelet_root}",
            f"--hostname-override={self.node.name}",
            f"--node-ip={self.ctx.config.host_ip}",
            f"--node-labels=kubevirt-py.io/node-index={self.node.index}",
            "--v=1",
        ]

    def listens(self) -> list[tuple[str, int]]:
        port, healthz = kubelet_ports(self.ctx, self.node)
        return [(self.ctx.config.host_ip, port), ("127.0.0.1", healthz)]

    def health(self) -> Health:
        _, healthz = kubelet_ports(self.ctx, self.node)
        conn = http.client.HTTPConnection("127.0.0.1", healthz, timeout=3)
        try:
            conn.request("GET", "/healthz")
            resp = conn.getresponse()
            body = resp.read(300).decode("utf-8", "replace")
        except (OSError, http.client.HTTPException) as exc:
            return Health(False, f"{type(exc).__name__}: {exc}")
        finally:
            conn.close()
        return Health(resp.status == 200, body)
