"""`up --prometheus`: the Prometheus built from the module proxy, and its config: Kubernetes
discovery of the labelled component pods at the cluster's apiserver, virt-api over TLS,
the others plain, accepted by the same build's promtool."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubevirt_api.monitoring.rules import rule_groups
from kv_cluster.components import ClusterContext
from kv_cluster.config import ClusterConfig, Ports
from kv_cluster.credentials import ensure_credentials
from kv_cluster.gobuild import ensure_built
from kv_cluster.layout import StateLayout
from kv_cluster.prometheus import prometheus_build, render_prometheus_config


@pytest.fixture(scope="module")
def promtool() -> Path:
    """The promtool of the cluster's Prometheus build (built once into the cache)."""
    spec = prometheus_build()
    cache = ClusterConfig.from_env().cache_dir
    return ensure_built(spec, cache) / "promtool"


def _ctx(tmp_path: Path) -> ClusterContext:
    config = ClusterConfig(
        state_dir=tmp_path / "state", cache_dir=tmp_path / "cache", ports=Ports(28200)
    )
    layout = StateLayout(config.state_dir)
    layout.create()
    return ClusterContext(
        config=config,
        layout=layout,
        credentials=ensure_credentials(config, layout),
        kubernetes_bin=tmp_path,
        etcd_binary=tmp_path,
    )


def _jobs(ctx: ClusterContext, data: Path) -> dict[str, dict[str, Any]]:
    body = yaml.safe_load(render_prometheus_config(ctx, data))
    return {job["job_name"]: job for job in body["scrape_configs"]}


def _rule(job: dict[str, Any], source: str) -> dict[str, Any]:
    [found] = [r for r in job["relabel_configs"] if r["source_labels"] == [source]]
    return found


def test_the_prometheus_build_stamps_the_release_and_keeps_kubernetes_discovery_only() -> None:
    spec = prometheus_build("v0.316.0")
    assert spec.binaries == ("prometheus", "promtool")
    assert "github.com/prometheus/common/version.Version=3.16.0" in spec.ldflags
    assert spec.tags == ("remove_all_sd", "enable_kubernetes_sd")


def test_prometheus_config_passes_promtool(tmp_path: Path, promtool: Path) -> None:
    ctx = _ctx(tmp_path)
    (ctx.layout.pki / "virt-api-ca.crt").write_text("")
    (tmp_path / "rules.yml").write_text(yaml.safe_dump({"groups": rule_groups("kubevirt")}))
    config = tmp_path / "prometheus.yml"
    config.write_text(render_prometheus_config(ctx, tmp_path))

    done = subprocess.run(
        [str(promtool), "check", "config", str(config)], capture_output=True, text=True, check=False
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 1 rule files found" in done.stdout + done.stderr


def test_both_jobs_discover_the_labelled_pods_of_kubevirt_at_the_clusters_apiserver(
    tmp_path: Path,
) -> None:
    ctx = _ctx(tmp_path)
    for job in _jobs(ctx, tmp_path).values():
        [sd] = job["kubernetes_sd_configs"]
        assert sd["role"] == "pod"
        assert sd["api_server"] == "https://10.95.0.1:28202"
        assert sd["namespaces"] == {"names": ["kubevirt"]}
        assert sd["tls_config"] == {
            "ca_file": str(ctx.layout.pki / "ca.crt"),
            "cert_file": str(ctx.layout.pki / "admin.crt"),
            "key_file": str(ctx.layout.pki / "admin.key"),
        }
        labelled = _rule(job, "__meta_kubernetes_pod_label_prometheus_kubevirt_io")
        assert (labelled["regex"], labelled["action"]) == ("true", "keep")
        port = _rule(job, "__meta_kubernetes_pod_container_port_number")
        assert (port["regex"], port["action"]) == ("8443", "keep")
        phase = _rule(job, "__meta_kubernetes_pod_phase")
        assert (phase["regex"], phase["action"]) == ("Running", "keep")
        targets = {
            r["target_label"]: r["source_labels"]
            for r in job["relabel_configs"]
            if "target_label" in r
        }
        assert targets == {
            "namespace": ["__meta_kubernetes_namespace"],
            "pod": ["__meta_kubernetes_pod_name"],
            "node": ["__meta_kubernetes_pod_node_name"],
            "component": ["__meta_kubernetes_pod_label_kubevirt_io"],
        }
        assert job["honor_labels"] is True


def test_virt_api_is_scraped_over_tls_and_the_other_components_plain(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    jobs = _jobs(ctx, tmp_path)
    api, others = jobs["kubevirt-virt-api"], jobs["kubevirt"]
    component = "__meta_kubernetes_pod_label_kubevirt_io"
    keep = [
        r for r in api["relabel_configs"] if r["source_labels"] == [component] and "action" in r
    ]
    assert keep == [{"source_labels": [component], "regex": "virt-api", "action": "keep"}]
    drop = [
        r for r in others["relabel_configs"] if r["source_labels"] == [component] and "action" in r
    ]
    assert drop == [{"source_labels": [component], "regex": "virt-api", "action": "drop"}]
    assert api["scheme"] == "https"
    assert api["tls_config"] == {
        "ca_file": str(ctx.layout.pki / "virt-api-ca.crt"),
        "server_name": "virt-api.kubevirt.svc",
    }
    assert others["scheme"] == "http"
    assert "tls_config" not in others
