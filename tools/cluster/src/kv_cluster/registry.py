"""The cluster's OCI registry: CNCF distribution, built from the Go module proxy.

Nodes pull kubevirt-py's images from it (containerd's certs.d makes it the docker.io host,
kv_cluster.containerd), and kv-images / kv-cluster push there. It serves HTTPS on the
cluster's host address at port base+5 with a serving cert from the cluster CA, and keeps
its blobs in the cache dir (`<cache>/registry-storage/<state dir name>-<hash>/`): they are
rebuildable from kv-images' archives like any cache, survive `kv-cluster down`, and one
cluster's tags never show in another's (the key is the state dir, a cluster's identity).

It runs when the cluster has a node (or with KV_CLUSTER_REGISTRY=1): nothing else pulls.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from pathlib import Path

import yaml
from kv_images import ENDPOINT_FILE, RegistryEndpoint

from kv_cluster.components import ClusterContext, Component
from kv_cluster.config import ClusterConfig
from kv_cluster.gobuild import GoBuild, ensure_built
from kv_cluster.health import Health, TlsClient, probe
from kv_cluster.nodehost import ChainGuard
from kv_cluster.nodes import read_node_count
from kv_cluster.pki import CertPaths
from kv_cluster.plan import REGISTRY

__all__ = [
    "REGISTRY_VERSION",
    "Registry",
    "registry_build",
    "registry_components",
    "registry_endpoint",
    "registry_guard",
    "registry_storage",
    "render_registry_config",
]

REGISTRY_VERSION = "v3.1.2"
_MODULE = "github.com/distribution/distribution/v3"
# The registry makes no outbound calls in this configuration (no proxy cache, no
# notifications); these keep it so: OpenTelemetry's default exporter would dial
# localhost:4318, and any HTTP client it has goes to a closed port.
_ENV = (
    "OTEL_SDK_DISABLED=true",
    "OTEL_TRACES_EXPORTER=none",
    "OTEL_METRICS_EXPORTER=none",
    "HTTP_PROXY=http://127.0.0.1:1",
    "HTTPS_PROXY=http://127.0.0.1:1",
    "NO_PROXY=",
)


def registry_build(version: str = REGISTRY_VERSION) -> GoBuild:
    """`registry` (distribution's cmd/registry) at `version`, cached like Kubernetes."""
    return GoBuild(
        name="registry",
        version=version,
        requires=((_MODULE, version),),
        packages=(f"{_MODULE}/cmd/registry",),
        ldflags=f"-s -w -X {_MODULE}/version.version={version}",
        module="kubevirtpy.local/registrybuild",
    )


def registry_storage(config: ClusterConfig) -> Path:
    """Where this cluster's registry keeps its blobs: outside the state dir, keyed by it."""
    key = hashlib.sha256(str(config.state_dir).encode()).hexdigest()[:12]
    return config.cache_dir / "registry-storage" / f"{config.state_dir.name}-{key}"


def registry_endpoint(ctx: ClusterContext) -> RegistryEndpoint:
    """The registry's address and the CA its serving cert is signed by."""
    config = ctx.config
    return RegistryEndpoint(
        f"{config.host_ip}:{config.ports.registry}", ca=ctx.credentials.ca.paths.cert
    )


def render_registry_config(
    config: ClusterConfig, serving: CertPaths, storage: Path, secret: str = ""
) -> str:
    """distribution's config.yml: HTTPS on the host address, filesystem storage, no proxy.
    `secret` signs upload state (one process, so any value; empty: the registry picks one
    and warns)."""
    body = {
        "version": "0.1",
        "log": {"level": "info", "formatter": "text", "accesslog": {"disabled": False}},
        "storage": {
            "filesystem": {"rootdirectory": str(storage)},
            "delete": {"enabled": True},
            "redirect": {"disable": True},
            "maintenance": {
                "uploadpurging": {"enabled": True, "age": "24h", "interval": "24h", "dryrun": False}
            },
        },
        "http": {
            "addr": f"{config.host_ip}:{config.ports.registry}",
            "net": "tcp",
            **({"secret": secret} if secret else {}),
            "tls": {
                "certificate": str(serving.cert),
                "key": str(serving.key),
                "minimumtls": "tls1.2",
            },
            "headers": {"X-Content-Type-Options": ["nosniff"]},
        },
        "health": {"storagedriver": {"enabled": True, "interval": "10s", "threshold": 3}},
    }
    return yaml.safe_dump(body, sort_keys=False)


class Registry(Component):
    """The registry process; `ensure` builds it first (once per version)."""

    name = "registry"
    provides = frozenset({REGISTRY})
    startup_timeout = 30.0

    @property
    def binary(self) -> Path:
        return registry_build().binary(self.ctx.config.cache_dir, "registry")

    @property
    def config_file(self) -> Path:
        return self.ctx.layout.data(self.name) / "config.yml"

    @property
    def endpoint_file(self) -> Path:
        return self.ctx.layout.root / ENDPOINT_FILE

    def serving(self) -> CertPaths:
        return self.ctx.credentials.ca.issue(
            self.ctx.layout.pki,
            "registry",
            "kubevirt-py-registry",
            server=True,
            dns_names=["localhost"],
            ip_addresses=[self.ctx.config.host_ip, "127.0.0.1"],
        )

    def prepare(self) -> None:
        storage = registry_storage(self.ctx.config)
        storage.mkdir(parents=True, exist_ok=True)
        data = self.ctx.layout.data(self.name)
        data.mkdir(parents=True, exist_ok=True)
        data.chmod(0o700)
        text = render_registry_config(
            self.ctx.config, self.serving(), storage, secrets.token_hex(32)
        )
        self.config_file.unlink(missing_ok=True)
        fd = os.open(self.config_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(text)

    def argv(self) -> list[str]:
        return ["/usr/bin/env", *_ENV, str(self.binary), "serve", str(self.config_file)]

    def listens(self) -> list[tuple[str, int]]:
        return [(self.ctx.config.host_ip, self.ctx.config.ports.registry)]

    def health(self) -> Health:
        tls = TlsClient(str(self.ctx.credentials.ca.paths.cert))
        found = probe(
            self.ctx.config.host_ip,
            self.ctx.config.ports.registry,
            "/v2/",
            tls,
            expect=lambda body: body == "{}",
        )
        if not found.ok:
            return found
        return Health(True, f"serving /v2/ at {registry_endpoint(self.ctx).address}")

    def ensure(self) -> str:
        ensure_built(registry_build(), self.ctx.config.cache_dir)
        action = super().ensure()
        # Written once it serves: kv-images pushes where this file points.
        registry_endpoint(self.ctx).save(self.endpoint_file)
        return action

    def stop(self) -> bool:
        self.endpoint_file.unlink(missing_ok=True)
        return super().stop()


def registry_guard(record: Path, config: ClusterConfig) -> ChainGuard:
    """An iptables INPUT rule: pods cannot reach the registry. It has no login, and a pod
    that could push would replace the images nodes run (virt-handler's is privileged);
    only host processes (containerd, kv-images) talk to it."""
    rule = ["-s", config.pod_cidr, "-d", config.host_ip, "-p", "tcp"]
    rule += ["--dport", str(config.ports.registry), "-j", "REJECT", "--reject-with", "tcp-reset"]
    return ChainGuard(record, f"KVPY-{config.ports.base}-REGISTRY", "INPUT", [rule])


def registry_wanted(ctx: ClusterContext, nodes: int | None = None) -> bool:
    """With a node (they pull from it), or when KV_CLUSTER_REGISTRY=1 asks for it anyway."""
    count = read_node_count(ctx.layout) if nodes is None else nodes
    return count > 0 or os.environ.get("KV_CLUSTER_REGISTRY") == "1"


def registry_components(ctx: ClusterContext, nodes: int | None = None) -> list[Component]:
    """The registry when this `up` wants it, or when one runs (so status and down see it)."""
    registry = Registry(ctx)
    record = registry.record()
    if registry_wanted(ctx, nodes) or (record is not None and record.alive()):
        return [registry]
    return []
