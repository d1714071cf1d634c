"""A real Prometheus, built from the Go module proxy, scraping the cluster's KubeVirt pods.

`kv-cluster up --prometheus` builds Prometheus (`cmd/prometheus` and `cmd/promtool` of
github.com/prometheus/prometheus, cached by version like Kubernetes) and runs it as a host
process, like the registry. Its Kubernetes service discovery watches the pods of the
install namespace at the apiserver (cluster CA, admin client certificate); relabelling
keeps the running pods labelled `prometheus.kubevirt.io=true` on their container port
8443, as upstream's ServiceMonitor selects them. virt-api is scraped over TLS (verified
against virt-api's CA with its service name), virt-controller and virt-handler over plain
HTTP; Prometheus evaluates KubeVirt's recording rules and alerts
(kubevirt_api.monitoring.rules). It listens on the cluster's host address at port base+6;
its data is under the state dir.

Built from the module proxy, Prometheus has no web UI assets (they come from an npm build
upstream); its HTTP API is complete. Only the Kubernetes discovery is compiled in
(build tags), which keeps the cloud providers' SDKs out of the build.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from kubevirt_api.monitoring.rules import rule_groups

from kv_cluster.components import ClusterContext, Component
from kv_cluster.gobuild import GoBuild, ensure_built
from kv_cluster.health import Health, probe
from kv_cluster.kubevirt_pods import virt_api_ca_file
from kv_cluster.plan import APISERVER

__all__ = [
    "PROMETHEUS",
    "PROMETHEUS_VERSION",
    "Prometheus",
    "prometheus_build",
    "prometheus_components",
    "prometheus_url",
    "render_prometheus_config",
    "want_prometheus",
]

#: Prometheus runs and serves its API (kv-cluster up --prometheus).
PROMETHEUS = "prometheus"
#: The module version; Prometheus 3.y.z is published as v0.3yy.z.
PROMETHEUS_VERSION = "v0.316.0"
_MODULE = "github.com/prometheus/prometheus"
_PORT_OFFSET = 6
_NAMESPACE = "kubevirt"
_METRICS_PORT = 8443
_MARKER = "prometheus.wanted"
_SCRAPE_INTERVAL = "10s"


def prometheus_build(version: str = PROMETHEUS_VERSION) -> GoBuild:
    """`prometheus` and `promtool` at `version`, with Kubernetes discovery only."""
    _, minor, patch = version.split(".")
    release = f"{int(minor) // 100}.{int(minor) % 100}.{patch}"
    stamp = "github.com/prometheus/common/version"
    return GoBuild(
        name="prometheus",
        version=version,
        requires=((_MODULE, version),),
        packages=(f"{_MODULE}/cmd/prometheus", f"{_MODULE}/cmd/promtool"),
        ldflags=f"-s -w -X {stamp}.Version={release} -X {stamp}.Branch=HEAD",
        tags=("remove_all_sd", "enable_kubernetes_sd"),
        module="kubevirtpy.local/prometheusbuild",
    )


def prometheus_url(ctx: ClusterContext) -> str:
    """Where Prometheus' HTTP API is."""
    return f"http://{ctx.config.host_ip}:{ctx.config.ports.base + _PORT_OFFSET}"


def _pod_discovery(ctx: ClusterContext) -> list[dict[str, Any]]:
    creds = ctx.credentials
    return [
        {
            "role": "pod",
            "api_server": f"https://{ctx.config.host_ip}:{ctx.config.ports.apiserver}",
            "tls_config": {
                "ca_file": str(creds.ca.paths.cert),
                "cert_file": str(creds.admin.cert),
                "key_file": str(creds.admin.key),
            },
            "namespaces": {"names": [_NAMESPACE]},
            # The watch asks the apiserver for the labelled pods only.
            "selectors": [{"role": "pod", "label": "prometheus.kubevirt.io=true"}],
        }
    ]


def _relabel(virt_api: bool) -> list[dict[str, Any]]:
    """Keep the running labelled pods' port 8443, virt-api's or the others'; label the
    targets with namespace, pod, node and component (the pod's `kubevirt.io` label)."""
    component = "__meta_kubernetes_pod_label_kubevirt_io"
    return [
        {
            "source_labels": ["__meta_kubernetes_pod_label_prometheus_kubevirt_io"],
            "regex": "true",
            "action": "keep",
        },
        {"source_labels": ["__meta_kubernetes_pod_phase"], "regex": "Running", "action": "keep"},
        {
            "source_labels": ["__meta_kubernetes_pod_container_port_number"],
            "regex": str(_METRICS_PORT),
            "action": "keep",
        },
        {
            "source_labels": [component],
            "regex": "virt-api",
            "action": "keep" if virt_api else "drop",
        },
        {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
        {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
        {"source_labels": ["__meta_kubernetes_pod_node_name"], "target_label": "node"},
        {"source_labels": [component], "target_label": "component"},
    ]


def render_prometheus_config(ctx: ClusterContext, data: Path) -> str:
    """prometheus.yml: the pods found by Kubernetes discovery, virt-api over TLS and the
    other components plain, and the rule file in ``data``."""
    rules = data / "rules.yml"
    virt_api_ca = virt_api_ca_file(ctx)
    body = {
        "global": {"scrape_interval": _SCRAPE_INTERVAL, "evaluation_interval": _SCRAPE_INTERVAL},
        "rule_files": [str(rules)],
        "scrape_configs": [
            {
                "job_name": "kubevirt-virt-api",
                # As upstream's ServiceMonitor: a series' own namespace and node (a VMI's)
                # win over the scraped pod's.
                "honor_labels": True,
                "scheme": "https",
                "tls_config": {
                    "ca_file": str(virt_api_ca),
                    "server_name": f"virt-api.{_NAMESPACE}.svc",
                },
                "kubernetes_sd_configs": _pod_discovery(ctx),
                "relabel_configs": _relabel(virt_api=True),
            },
            {
                "job_name": "kubevirt",
                "honor_labels": True,
                "scheme": "http",
                "kubernetes_sd_configs": _pod_discovery(ctx),
                "relabel_configs": _relabel(virt_api=False),
            },
        ],
    }
    return yaml.safe_dump(body, sort_keys=False)


class Prometheus(Component):
    """The prometheus process; `ensure` builds it first (once per version), and its
    config and rules are rewritten at each start."""

    name = "prometheus"
    provides = frozenset({PROMETHEUS})
    requires = frozenset({APISERVER})
    startup_timeout = 60.0

    @property
    def port(self) -> int:
        return self.ctx.config.ports.base + _PORT_OFFSET

    @property
    def data(self) -> Path:
        return self.ctx.layout.data(self.name)

    @property
    def binary(self) -> Path:
        return prometheus_build().binary(self.ctx.config.cache_dir, "prometheus")

    def prepare(self) -> None:
        (self.data / "tsdb").mkdir(parents=True, exist_ok=True)
        rules = self.data / "rules.yml"
        rules.write_text(yaml.safe_dump({"groups": rule_groups(_NAMESPACE)}, sort_keys=False))
        (self.data / "prometheus.yml").write_text(render_prometheus_config(self.ctx, self.data))

    def argv(self) -> list[str]:
        return [
            str(self.binary),
            f"--config.file={self.data / 'prometheus.yml'}",
            f"--storage.tsdb.path={self.data / 'tsdb'}",
            f"--web.listen-address={self.ctx.config.host_ip}:{self.port}",
            "--storage.tsdb.retention.time=2d",
        ]

    def listens(self) -> list[tuple[str, int]]:
        return [(self.ctx.config.host_ip, self.port)]

    def health(self) -> Health:
        found = probe(self.ctx.config.host_ip, self.port, "/-/ready", None, timeout=5.0)
        if not found.ok:
            return found
        return Health(True, f"serving {prometheus_url(self.ctx)}")

    def ensure(self) -> str:
        ensure_built(prometheus_build(), self.ctx.config.cache_dir)
        return super().ensure()


def want_prometheus(ctx: ClusterContext, wanted: bool) -> None:
    """Remember `--prometheus` for later `up`s of this cluster (until `down`)."""
    marker = ctx.layout.root / _MARKER
    if wanted:
        marker.write_text("1\n")


def prometheus_components(ctx: ClusterContext) -> list[Component]:
    """Prometheus when an `up --prometheus` asked for it, or when it runs."""
    prometheus = Prometheus(ctx)
    if (ctx.layout.root / _MARKER).exists():
        return [prometheus]
    record = prometheus.record()
    return [prometheus] if record is not None and record.alive() else []
