"""virt-controller and one virt-handler per node, run by `up` as host processes.

They run on the host (like virt-api) with the admin kubeconfig: the handler needs the
node's kubelet root dir (pods dir, device-plugins dir), which on this machine is
`<state>/nodes/<node>/kubelet/root`. The relay between virt-api and each handler is
HTTPS with mutual TLS, both certificates from the cluster CA: the handler serves with
`virt-handler-<node>` and trusts only client certificates issued by that CA; virt-api
presents `virt-api-handler-client` (see `handler_flags`, passed by kv_cluster.kubevirt).

They need the CRDs and the KubeVirt CR (kv_cluster.kubevirt_cr), which `up` applies first.
Set KV_CLUSTER_VIRT_NODE=0 to leave them out.
"""

from __future__ import annotations

import http.client
import os
import sys
from pathlib import Path

from kv_cluster.components import ClusterContext, Component
from kv_cluster.health import Health
from kv_cluster.nodes import NodeSpec, node_specs, read_node_count
from kv_cluster.pki import CertPaths
from kv_cluster.plan import KUBEVIRT_CONFIG, KUBEVIRT_CRDS, node_named

__all__ = [
    "CONTROLLER_PORT_OFFSET",
    "HANDLER_PORT_OFFSET",
    "VirtController",
    "VirtHandler",
    "handler_client_cert",
    "handler_flags",
    "launcher_image",
    "virt_node_components",
]

CONTROLLER_PORT_OFFSET = 21
# Two ports per node: the relay (mutual TLS) and /metrics.
HANDLER_PORT_OFFSET = 22


def launcher_image() -> str:
    """The launcher image reference the controller renders (built by kv-images)."""
    return os.environ.get("KV_CLUSTER_LAUNCHER_IMAGE", "docker.io/kubevirt-py/virt-launcher:devel")


def handler_client_cert(ctx: ClusterContext) -> CertPaths:
    """virt-api's client certificate for the handler relay."""
    return ctx.credentials.ca.issue(
        ctx.layout.pki, "virt-api-handler-client", "virt-api", client=True
    )


def _http_ok(host: str, port: int, path: str) -> Health:
    conn = http.client.HTTPConnection(host, port, timeout=3)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        body = resp.read(2048).decode("utf-8", "replace")
    except (OSError, http.client.HTTPException) as exc:
        return Health(False, f"{type(exc).__name__}: {exc}")
    finally:
        conn.close()
    return Health(resp.status == 200, f"HTTP {resp.status}: {body[:200]}")


class VirtController(Component):
    """virt-controller on the host (leader election on, one instance)."""

    name = "virt-controller"
    startup_timeout = 60.0
    requires = frozenset({KUBEVIRT_CRDS, KUBEVIRT_CONFIG})

    @property
    def port(self) -> int:
        return self.ctx.config.ports.base + CONTROLLER_PORT_OFFSET

    def argv(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "virt_controller",
            f"--kubeconfig={self.ctx.layout.admin_kubeconfig}",
            "--bind=127.0.0.1",
            f"--port={self.port}",
            f"--launcher-image={launcher_image()}",
            "--image-pull-policy=IfNotPresent",
        ]

    def listens(self) -> list[tuple[str, int]]:
        return [("127.0.0.1", self.port)]

    def health(self) -> Health:
        return _http_ok("127.0.0.1", self.port, "/healthz")


class VirtHandler(Component):
    """virt-handler for one node, on the host, as root."""

    startup_timeout = 60.0

    def __init__(self, ctx: ClusterContext, node: NodeSpec) -> None:
        super().__init__(ctx)
        self.node = node
        self.name = f"virt-handler-{node.name}"
        self.requires = frozenset({KUBEVIRT_CRDS, KUBEVIRT_CONFIG, node_named(node.name)})

    @property
    def relay_port(self) -> int:
        return self.ctx.config.ports.base + HANDLER_PORT_OFFSET + 2 * self.node.index

    @property
    def metrics_port(self) -> int:
        return self.relay_port + 1

    @property
    def runtime_dir(self) -> Path:
        return self.node.root / "kubevirt"

    def _serving(self) -> CertPaths:
        return self.ctx.credentials.ca.issue(
            self.ctx.layout.pki,
            f"virt-handler-{self.node.name}",
            f"virt-handler.{self.node.name}",
            server=True,
            client=True,  # the source handler's certificate for live migration's mutual TLS
            dns_names=["virt-handler", self.node.name],
            ip_addresses=[self.ctx.config.host_ip],
        )

    def prepare(self) -> None:
        self._serving()
        handler_client_cert(self.ctx)
        self.runtime_dir.mkdir(parents=True, exist_ok=True)

    def argv(self) -> list[str]:
        serving = self._serving()
        return [
            sys.executable,
            "-m",
            "virt_handler",
            f"--node-name={self.node.name}",
            f"--kubeconfig={self.ctx.layout.admin_kubeconfig}",
            f"--kubelet-root={self.node.kubelet_root}",
            f"--runtime-dir={self.runtime_dir}",
            f"--bind={self.ctx.config.host_ip}",
            f"--port={self.relay_port}",
            f"--tls-cert={serving.cert}",
            f"--tls-key={serving.key}",
            f"--client-ca={self.ctx.credentials.ca.paths.cert}",
            "--metrics-bind=127.0.0.1",
            f"--metrics-port={self.metrics_port}",
            "--heartbeat-interval=15",
        ]

    def listens(self) -> list[tuple[str, int]]:
        return [(self.ctx.config.host_ip, self.relay_port), ("127.0.0.1", self.metrics_port)]

    def health(self) -> Health:
        return _http_ok("127.0.0.1", self.metrics_port, "/healthz")

    def url(self) -> str:
        return f"https://{self.ctx.config.host_ip}:{self.relay_port}"

    def metrics_url(self) -> str:
        """Its /metrics, reachable from the host."""
        return f"http://127.0.0.1:{self.metrics_port}/metrics"


def virt_node_components(ctx: ClusterContext) -> list[Component]:
    """The controller and a handler per node (none when disabled or without nodes)."""
    if os.environ.get("KV_CLUSTER_VIRT_NODE", "1") == "0":
        return []
    count = read_node_count(ctx.layout)
    if count == 0:
        return []
    components: list[Component] = [VirtController(ctx)]
    components += [VirtHandler(ctx, n) for n in node_specs(ctx.config, ctx.layout, count)]
    return components


def handler_flags(ctx: ClusterContext) -> list[str]:
    """virt-api's flags for the handler relay (first node's handler; empty without nodes)."""
    if os.environ.get("KV_CLUSTER_VIRT_NODE", "1") == "0" or read_node_count(ctx.layout) == 0:
        return []
    node = node_specs(ctx.config, ctx.layout, 1)[0]
    handler = VirtHandler(ctx, node)
    client = handler_client_cert(ctx)
    return [
        f"--handler-url={handler.url()}",
        f"--handler-ca={ctx.credentials.ca.paths.cert}",
        f"--handler-client-cert={client.cert}",
        f"--handler-client-key={client.key}",
    ]
