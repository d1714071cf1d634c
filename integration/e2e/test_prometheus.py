"""Prometheus (`kv-cluster up --prometheus`) finds the component pods through its
Kubernetes discovery and sees the running VM and the leading virt-controller under
upstream's metric names; virt-api going away (its Deployment scaled to 0) takes upstream's
recording rule over Prometheus' own `up` (`cluster:kubevirt_virt_api_up:sum`) to 0 and
makes VirtAPIDown pending. This cluster has no kube-state-metrics: the running count
VirtAPIDown reads falls back to Prometheus' scrape targets (docs/observability.md)."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from typing import Any

from kv_cluster.prometheus import prometheus_url


def _query(base: str, promql: str) -> list[dict[str, Any]]:
    url = f"{base}/api/v1/query?{urllib.parse.urlencode({'query': promql})}"
    with urllib.request.urlopen(url, timeout=10) as response:
        body = json.load(response)
    assert body["status"] == "success", body
    return list(body["data"]["result"])


def _value(base: str, promql: str) -> float | None:
    found = _query(base, promql)
    return float(found[0]["value"][1]) if found else None


_API_UP = "cluster:kubevirt_virt_api_up:sum"
_API_RUNNING = "cluster:kubevirt_virt_api_pods_running:count"
_API_DOWN = 'ALERTS{alertname="VirtAPIDown"}'
_API_DOWN_PENDING = 'ALERTS{alertname="VirtAPIDown",alertstate="pending"}'


def _scale_to_zero(kubevirt: Any, deployment: str) -> int | None:
    """Scale a Deployment of the install to 0 and wait for its pods to go; returns its
    replicas before (None when there is no such Deployment: not installed by the operator)."""
    found = kubevirt.kubectl.run(
        "-n", "kubevirt", "get", "deployment", deployment, "-o", "json", check=False
    )
    if found.returncode != 0:
        return None
    replicas = int(json.loads(found.stdout)["spec"].get("replicas", 1))
    kubevirt.kubectl.run("-n", "kubevirt", "scale", "deployment", deployment, "--replicas=0")
    kubevirt.wait_for(
        f"{deployment}'s pods to go",
        lambda: (
            not json.loads(
                kubevirt.kubectl.run(
                    "-n", "kubevirt", "get", "pods", "-l", f"kubevirt.io={deployment}", "-o", "json"
                ).stdout
            )["items"]
            or None
        ),
        120,
    )
    return replicas


def test_prometheus_sees_the_vm_the_leader_and_virt_api_going_away(
    kube: Any, kubevirt: Any, namespace: str
) -> None:
    local = kube.require_local()
    local.up(prometheus=True)
    base = prometheus_url(local._context())

    kubevirt.apply(kubevirt.vm("tiny"), namespace)
    kubevirt.wait_running("tiny", namespace)
    info = kubevirt.wait_for(
        "kubevirt_vmi_info of the running VM in Prometheus",
        lambda: _query(
            base, f'kubevirt_vmi_info{{name="tiny",namespace="{namespace}",phase="running"}}'
        ),
        120,
    )
    assert info[0]["metric"]["node"] == kubevirt.node
    leaders = kubevirt.wait_for(
        "one leading virt-controller in Prometheus",
        lambda: _query(base, "kubevirt_virt_controller_leading_status == 1"),
        120,
    )
    assert len(leaders) == 1
    assert leaders[0]["metric"]["pod"].startswith("virt-controller-")
    kubevirt.wait_for(
        f"{_API_UP} >= 1 (virt-api scraped over TLS)",
        lambda: (_value(base, _API_UP) or 0) >= 1 or None,
        120,
    )
    kubevirt.wait_for(
        f"{_API_RUNNING} >= 1 while virt-api runs",
        lambda: (_value(base, _API_RUNNING) or 0) >= 1 or None,
        120,
    )
    # The alert group is evaluated apart from the recording rules: up to one interval later.
    kubevirt.wait_for(
        "VirtAPIDown inactive while virt-api runs",
        lambda: _query(base, _API_DOWN) == [] or None,
        60,
    )

    # virt-operator would put virt-api's replicas back (drift): it stands aside first, as
    # upstream's monitoring tests make it.
    operator = _scale_to_zero(kubevirt, "virt-operator")
    scale = ("-n", "kubevirt", "scale", "deployment", "virt-api")
    kubevirt.kubectl.run(*scale, "--replicas=0")
    try:
        kubevirt.wait_for(
            f"{_API_UP} == 0 once no virt-api pod is discovered",
            lambda: _value(base, _API_UP) == 0 or None,
            180,
        )
        pending = kubevirt.wait_for(
            "VirtAPIDown pending once no virt-api pod runs",
            lambda: _query(base, _API_DOWN_PENDING),
            120,
        )
        assert pending[0]["metric"]["severity"] == "critical"
    finally:
        kubevirt.kubectl.run(*scale, "--replicas=1")
        if operator is not None:
            kubevirt.kubectl.run(
                "-n", "kubevirt", "scale", "deployment", "virt-operator", f"--replicas={operator}"
            )
        kubevirt.kubectl.run(
            "-n", "kubevirt", "rollout", "status", "deployment/virt-api", "--timeout=180s"
        )
