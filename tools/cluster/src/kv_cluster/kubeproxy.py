"""kube-proxy in iptables mode, one per host: every node shares this network namespace.

It is told to leave host-wide settings alone: no conntrack table or timeout changes, no
NodePorts on 127.0.0.1 (that would need route_localnet), NodePorts only on the host address.
"""

from __future__ import annotations

import http.client
import os
import subprocess
from pathlib import Path
from typing import Any

import yaml

from kv_cluster.components import ClusterContext, Component, ComponentError
from kv_cluster.health import Health
from kv_cluster.kubeconfig import write_kubeconfig
from kv_cluster.nodehost import other_process_running
from kv_cluster.nodes import NodeSpec
from kv_cluster.plan import APISERVER

__all__ = [
    "KubeProxy",
    "cleanup_kube_proxy_rules",
    "kube_proxy_enabled",
    "render_kube_proxy_config",
]


def kube_proxy_enabled() -> bool:
    """False with KV_CLUSTER_KUBE_PROXY=0: a second cluster with nodes on a host whose
    kube-proxy (host-wide KUBE-* chains) belongs to another cluster runs without one."""
    return os.environ.get("KV_CLUSTER_KUBE_PROXY", "1") != "0"


def _ports(ctx: ClusterContext) -> tuple[int, int]:
    """(healthz, metrics)."""
    return ctx.config.ports.node(0), ctx.config.ports.node(1)


def render_kube_proxy_config(
    ctx: ClusterContext, node: NodeSpec, kubeconfig: Path
) -> dict[str, Any]:
    healthz, metrics = _ports(ctx)
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "mode": "iptables",
        "clusterCIDR": ctx.config.pod_cidr,
        "hostnameOverride": node.name,
        "bindAddress": ctx.config.host_ip,
        "healthzBindAddress": f"127.0.0.1:{healthz}",
        "metricsBindAddress": f"127.0.0.1:{metrics}",
        "nodePortAddresses": [f"{ctx.config.host_ip}/32"],
        "oomScoreAdj": 0,
        "conntrack": {
            "maxPerCore": 0,
            "min": 0,
            "tcpEstablishedTimeout": "0s",
            "tcpCloseWaitTimeout": "0s",
        },
        "iptables": {
            "localhostNodePorts": False,
            "masqueradeAll": False,
            "syncPeriod": "10s",
            "minSyncPeriod": "0s",
        },
        "logging": {"format": "text", "verbosity": 1},
    }


class KubeProxy(Component):
    """kube-proxy, running as node 0 for the whole host."""

    name = "kube-proxy"
    requires = frozenset({APISERVER})
    startup_timeout = 60.0

    def __init__(self, ctx: ClusterContext, node: NodeSpec) -> None:
        super().__init__(ctx)
        self.node = node

    @property
    def _dir(self) -> Path:
        return self.ctx.layout.data("kube-proxy")

    def prepare(self) -> None:
        if other_process_running("kube-proxy"):
            raise ComponentError(
                "another cluster's kube-proxy runs on this host; kube-proxy's iptables chains "
                "are host-wide, so only one cluster per host can run nodes: take that cluster "
                "down (or its nodes, `kv-cluster up --nodes 0` with its state dir), or start "
                "this one with --nodes 0"
            )
        self._dir.mkdir(parents=True, exist_ok=True)
        ca = self.ctx.credentials.ca
        client = ca.issue(
            self.ctx.layout.pki, "kube-proxy-client", "system:kube-proxy", client=True
        )
        kubeconfig = self.ctx.layout.kubeconfig("kube-proxy")
        write_kubeconfig(
            kubeconfig,
            cluster=self.ctx.config.cluster_name,
            server=f"https://{self.ctx.config.host_ip}:{self.ctx.config.ports.apiserver}",
            ca=ca.paths.cert,
            user="system:kube-proxy",
            client=client,
        )
        config = render_kube_proxy_config(self.ctx, self.node, kubeconfig)
        (self._dir / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))

    def argv(self) -> list[str]:
        return [
            str(self.ctx.kubernetes_bin / "kube-proxy"),
            f"--config={self._dir / 'config.yaml'}",
            "--v=1",
        ]

    def listens(self) -> list[tuple[str, int]]:
        healthz, metrics = _ports(self.ctx)
        return [("127.0.0.1", healthz), ("127.0.0.1", metrics)]

    def health(self) -> Health:
        healthz, _ = _ports(self.ctx)
        conn = http.client.HTTPConnection("127.0.0.1", healthz, timeout=3)
        try:
            conn.request("GET", "/healthz")
            resp = conn.getresponse()
            body = resp.read(500).decode("utf-8", "replace")
        except (OSError, http.client.HTTPException) as exc:
            return Health(False, f"{type(exc).__name__}: {exc}")
        finally:
            conn.close()
        return Health(resp.status == 200, body)


def cleanup_kube_proxy_rules(ctx: ClusterContext) -> bool:
    """`kube-proxy --cleanup`: remove the KUBE-* chains it programmed; True if it ran."""
    binary = ctx.kubernetes_bin / "kube-proxy"
    if not binary.exists() or other_process_running("kube-proxy"):
        # The KUBE-* chains are host-wide: another cluster's kube-proxy still uses them.
        return False
    proc = subprocess.run([str(binary), "--cleanup", "--v=0"], capture_output=True, check=False)
    return proc.returncode == 0
