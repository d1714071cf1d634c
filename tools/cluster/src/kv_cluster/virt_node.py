"""virt-controller and one virt-handler per node, run by `up` as host processes.

They run on the host (like virt-api) with the admin kubeconfig: the handler needs the
node's kubelet root dir (pods dir, device-plugins dir), which on this machine is
`<state>/nodes/<node>/kubelet/root`. The relay between virt-api and each handler is
HTTPS with mutual TLS, both certificates from the cluster CA: the handler serves with
`virt-handler-<node>` and trusts only client certificates issued by that CA; virt-api
presents `virt-api-handler-client` (see `handler_flags`, passed by kv_cluster.kubevirt).

The KubeVirt CR `kubevirt/kubevirt` is created with
`developerConfiguration.useEmulation: true` when KVM cannot run guests here (this host
kind has a kvm-pvm /dev/kvm without vmx/svm, so TCG).
Set KV_CLUSTER_VIRT_NODE=0 to leave them out.
"""

from __future__ import annotations

import http.client
import json
import os
import sys
from pathlib import Path

from kv_cluster.components import ClusterContext, Component
from kv_cluster.crds import crds_dir
from kv_cluster.health import Health
from kv_cluster.kubectl import Kubectl
from kv_cluster.nodes import NodeSpec, node_specs, read_node_count
from kv_cluster.pki import CertPaths

__all__ = [
    "CONTROLLER_PORT_OFFSET",
    "HANDLER_PORT_OFFSET",
    "VirtController",
    "VirtHandler",
    "ensure_kubevirt_cr",
    "handler_client_cert",
    "handler_flags",
    "kvm_runs_guests",
    "launcher_image",
    "virt_node_components",
]

CONTROLLER_PORT_OFFSET = 21
# Two ports per node: the relay (mutual TLS) and /metrics.
HANDLER_PORT_OFFSET = 22
NAMESPACE = "kubevirt"
KUBEVIRT_CRD = "kubevirts.kubevirt.io.yaml"


def kvm_runs_guests() -> bool:
    """True when /dev/kvm is usable for real guests (the CPU has vmx or svm)."""
    if not os.path.exists("/dev/kvm"):
        return False
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return " vmx" in flags or " svm" in flags


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


def ensure_kubevirt_cr(kubectl: Kubectl) -> None:
    """Create (or update) the KubeVirt CR with useEmulation when KVM cannot run guests."""
    body = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "KubeVirt",
        "metadata": {"name": "kubevirt", "namespace": NAMESPACE},
        "spec": {
            "configuration": {
                "developerConfiguration": {"useEmulation": not kvm_runs_guests()},
            }
        },
    }
    kubectl.run(
        "apply", "--server-side", "--field-manager=kv-cluster", "-f", "-", stdin=json.dumps(body)
    )


class VirtController(Component):
    """virt-controller on the host (leader election on, one instance)."""

    name = "virt-controller"
    startup_timeout = 60.0

    @property
    def port(self) -> int:
        return self.ctx.config.ports.base + CONTROLLER_PORT_OFFSET

    def prepare(self) -> None:
        kubectl = Kubectl(self.ctx.layout.admin_kubeconfig)
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        kubectl.run("apply", "-f", "-", stdin=json.dumps(namespace))
        # `up` installs the CRDs after the components; the CR needs its own CRD now.
        directory = crds_dir()
        if directory is not None and (directory / KUBEVIRT_CRD).exists():
            kubectl.run(
                "apply",
                "--server-side",
                "--field-manager=kv-cluster",
                "-f",
                str(directory / KUBEVIRT_CRD),
            )
            kubectl.run(
                "wait",
                "--for=condition=Established",
                "--timeout=30s",
                "crd/kubevirts.kubevirt.io",
            )
        ensure_kubevirt_cr(kubectl)

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
