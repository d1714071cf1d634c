"""KubeVirt's own components in the local cluster; for now virt-api, run on the host.

Until the node exists, virt-api runs as a host process on the cluster's host address;
a selector-less Service with Endpoints on that address lets the real API server call its
webhooks and route `subresources.kubevirt.io` to it (aggregator routing uses endpoints).
Set KV_CLUSTER_VIRT_API=0 to leave it out.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import yaml
from virt_operator.components import COMPONENTS_DIR

from kv_cluster.components import ClusterContext, Component, ComponentError
from kv_cluster.crds import crds_dir
from kv_cluster.health import Health, TlsClient, probe
from kv_cluster.kubectl import Kubectl, KubectlError
from kv_cluster.kubevirt_pods import KubevirtPods, operator_mode, pods_mode
from kv_cluster.nodes import node_specs, read_node_count
from kv_cluster.pki import CertificateAuthority, CertPaths
from kv_cluster.plan import APISERVER, KUBEVIRT_ADMISSION, KUBEVIRT_CONFIG, KUBEVIRT_CRDS
from kv_cluster.process import stop_process
from kv_cluster.virt_node import VirtHandler, handler_flags, virt_node_components

__all__ = ["VIRT_API_PORT_OFFSET", "VirtApi", "kubevirt_components", "virt_api_manifests_dir"]

# Ports base+20..29 belong to KubeVirt's components (0-9 control plane, 10-19 node).
VIRT_API_PORT_OFFSET = 20
NAMESPACE = "kubevirt"
SERVICE_ACCOUNT = "kubevirt-apiserver"
REGISTRATIONS = ("webhooks.yaml", "apiservice.yaml")


def virt_api_manifests_dir() -> Path:
    """virt-api's manifests, as virt-operator ships them (one source for every installer)."""
    return COMPONENTS_DIR / "virt-api"


def source_digest() -> str:
    """A digest of virt-api's Python sources and its libs' (what the process runs)."""
    crds = crds_dir()
    if crds is None:
        raise FileNotFoundError("cannot find the repository's manifests/ directory")
    root = crds.parent.parent
    digest = hashlib.sha256()
    trees = [root / "services" / "virt-api" / "src"]
    trees += [
        root / "libs" / lib / "src" for lib in ("kubevirt-api", "kube-runtime", "service-kit")
    ]
    for tree in trees:
        for path in sorted(tree.rglob("*.py")):
            digest.update(str(path.relative_to(root)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def kubevirt_components(ctx: ClusterContext) -> list[Component]:
    """KubeVirt components run by `up` after the control plane (none if disabled).

    KV_CLUSTER_KUBEVIRT=pods with a node: one step that deploys them as pods instead.
    """
    if pods_mode(ctx):
        return [KubevirtPods(ctx)]
    if operator_mode(ctx):
        from kv_cluster.kubevirt_operator import KubevirtOperator  # imports kubevirt_pods

        return [KubevirtOperator(ctx)]
    api: list[Component] = (
        [] if os.environ.get("KV_CLUSTER_VIRT_API", "1") == "0" else [VirtApi(ctx)]
    )
    return api + virt_node_components(ctx)


class VirtApi(Component):
    """virt-api as a host process, registered with the API server once healthy."""

    name = "virt-api"
    startup_timeout = 30.0
    requires = frozenset({APISERVER, KUBEVIRT_CRDS, KUBEVIRT_CONFIG})
    provides = frozenset({KUBEVIRT_ADMISSION})

    @property
    def port(self) -> int:
        return self.ctx.config.ports.base + VIRT_API_PORT_OFFSET

    @property
    def _pki(self) -> Path:
        return self.ctx.layout.pki

    def _ca(self) -> CertificateAuthority:
        return CertificateAuthority.load_or_create(
            self._pki, "virt-api-ca", "kubevirt-py-virt-api-ca"
        )

    def _serving(self) -> CertPaths:
        service = f"virt-api.{NAMESPACE}"
        return self._ca().issue(
            self._pki,
            "virt-api",
            f"{service}.svc",
            server=True,
            dns_names=[f"{service}.svc", f"{service}.svc.cluster.local", service, "virt-api"],
            ip_addresses=[self.ctx.config.host_ip],
        )

    @property
    def _token_file(self) -> Path:
        return self._pki / "virt-api.token"

    def _kubectl(self) -> Kubectl:
        return Kubectl(self.ctx.layout.admin_kubeconfig)

    def prepare(self) -> None:
        """Certificates, namespace, RBAC, a token for its service account, Service + Endpoints."""
        self._serving()
        kubectl = self._kubectl()
        manifests = virt_api_manifests_dir()
        for name in ("namespace.yaml", "rbac.yaml"):
            kubectl.run("apply", "-f", str(manifests / name))
        token = kubectl.run(
            "create", "token", SERVICE_ACCOUNT, "-n", NAMESPACE, "--duration=8760h"
        ).stdout.strip()
        self._token_file.write_text(token + "\n")
        self._token_file.chmod(0o600)
        service = yaml.safe_load((manifests / "service.yaml").read_text())
        service["spec"].pop("selector", None)  # endpoints are ours: the host process
        endpoints = {
            "apiVersion": "v1",
            "kind": "Endpoints",
            "metadata": {
                "name": "virt-api",
                "namespace": NAMESPACE,
                "labels": {"kubevirt.io": "virt-api"},
            },
            "subsets": [
                {
                    "addresses": [{"ip": self.ctx.config.host_ip}],
                    "ports": [{"name": "https", "port": self.port, "protocol": "TCP"}],
                }
            ],
        }
        kubectl.run(
            "apply",
            "-f",
            "-",
            stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": [service, endpoints]}),
        )

    def argv(self) -> list[str]:
        serving = self._serving()
        return [
            sys.executable,
            "-m",
            "virt_api",
            f"--bind={self.ctx.config.host_ip}",
            f"--port={self.port}",
            f"--tls-cert={serving.cert}",
            f"--tls-key={serving.key}",
            f"--kubeconfig={self.ctx.layout.admin_kubeconfig}",
            f"--token-file={self._token_file}",
            # Components other than virt-api still run on the host with admin credentials.
            "--kubevirt-groups=system:masters",
            *handler_flags(ctx=self.ctx),
            *self._handler_per_node(),
            f"--source-digest={source_digest()}",
        ]

    def _handler_per_node(self) -> list[str]:
        """One relay URL per node's handler (handler_flags names only the first)."""
        if not handler_flags(ctx=self.ctx):
            return []
        nodes = node_specs(self.ctx.config, self.ctx.layout, read_node_count(self.ctx.layout))
        return [f"--handler-node-url={n.name}={VirtHandler(self.ctx, n).url()}" for n in nodes]

    def listens(self) -> list[tuple[str, int]]:
        return [(self.ctx.config.host_ip, self.port)]

    def health(self) -> Health:
        return probe(
            self.ctx.config.host_ip, self.port, "/healthz", TlsClient(str(self._ca().paths.cert))
        )

    def ensure(self) -> str:
        record = self.record()
        if record is not None and record.alive() and list(record.argv) != self.argv():
            # Other flags or newer code (the digest is in argv): restart, do not keep stale rules.
            stop_process(record)
        try:
            action = super().ensure()
        except ComponentError:
            # Fail-closed webhooks pointing at a dead virt-api would refuse every VM/VMI write
            # in the cluster; take them away so the cluster stays usable, then report.
            self._unregister()
            raise
        self.register()
        return action

    def register(self, timeout: float = 60.0) -> None:
        """Apply the webhook configurations and APIServices with our CA; wait until Available."""
        bundle = base64.b64encode(self._ca().cert_pem).decode()
        items: list[dict[str, Any]] = []
        for name in REGISTRATIONS:
            for doc in yaml.safe_load_all((virt_api_manifests_dir() / name).read_text()):
                if not isinstance(doc, dict):
                    continue
                if doc["kind"] == "APIService":
                    doc["spec"]["caBundle"] = bundle
                else:
                    for hook in doc.get("webhooks", []):
                        hook["clientConfig"]["caBundle"] = bundle
                items.append(doc)
        kubectl = self._kubectl()
        for name in ("namespace.yaml", "rbac.yaml"):  # idempotent; picks up RBAC changes
            kubectl.run("apply", "-f", str(virt_api_manifests_dir() / name))
        kubectl.run(
            "apply",
            "-f",
            "-",
            stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}),
        )
        names = [d["metadata"]["name"] for d in items if d["kind"] == "APIService"]
        deadline = time.monotonic() + timeout
        while True:
            pending = [n for n in names if not self._available(kubectl, n)]
            if not pending:
                return
            if time.monotonic() > deadline:
                raise KubectlError(
                    ["get", "apiservice", *pending], 1, "APIService not Available in time"
                )
            time.sleep(0.5)

    @staticmethod
    def _available(kubectl: Kubectl, name: str) -> bool:
        found = kubectl.run("get", "apiservice", name, "-o", "json", check=False)
        if found.returncode != 0:
            return False
        conditions = json.loads(found.stdout).get("status", {}).get("conditions", [])
        return any(c.get("type") == "Available" and c.get("status") == "True" for c in conditions)

    def stop(self) -> bool:
        """Unregister first: webhooks that fail closed must not outlive the process."""
        self._unregister()
        return super().stop()

    def _unregister(self) -> None:
        kubectl = self._kubectl()
        if self.ctx.layout.admin_kubeconfig.exists():
            kubectl.run(
                "delete",
                "mutatingwebhookconfiguration/virt-api-mutator",
                "validatingwebhookconfiguration/virt-api-validator",
                "apiservice/v1.subresources.kubevirt.io",
                "apiservice/v1alpha3.subresources.kubevirt.io",
                "--ignore-not-found",
                "--wait=false",
                check=False,
                timeout=20,
            )
