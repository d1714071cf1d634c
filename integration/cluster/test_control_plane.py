"""The control plane is up, authorizes with RBAC, and keeps cluster traffic off the wire."""

from __future__ import annotations

import subprocess
from typing import Any

from kv_cluster import Kubectl


def test_every_component_reports_healthy(kube: Any) -> None:
    cluster = kube.require_local()
    statuses = {s.name: s for s in cluster.status()}
    control_plane = {"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"}
    assert control_plane <= set(statuses)  # node and KubeVirt components may follow
    unhealthy = {name: s.health.detail for name, s in statuses.items() if not s.health.ok}
    assert unhealthy == {}


def test_the_apiserver_is_ready_and_serves_the_pinned_version(kubectl: Kubectl) -> None:
    assert kubectl.run("get", "--raw=/readyz").stdout.strip() == "ok"
    version = kubectl.json("version")
    assert version["serverVersion"]["gitVersion"].startswith("v1.37.")


def test_rbac_denies_a_service_account_what_it_was_not_granted(
    kubectl: Kubectl, namespace: str
) -> None:
    sa = f"system:serviceaccount:{namespace}:default"
    denied = kubectl.run(
        "auth", "can-i", "create", "pods", "-n", namespace, f"--as={sa}", check=False
    )
    assert denied.stdout.strip() == "no"
    kubectl.run(
        "create",
        "rolebinding",
        "edit",
        "--clusterrole=edit",
        f"--serviceaccount={namespace}:default",
        "-n",
        namespace,
    )
    allowed = kubectl.run(
        "auth", "can-i", "create", "pods", "-n", namespace, f"--as={sa}", check=False
    )
    assert allowed.stdout.strip() == "yes"


def test_the_controller_manager_creates_service_accounts(kubectl: Kubectl, namespace: str) -> None:
    kubectl.run("wait", "--for=create", "serviceaccount/default", "-n", namespace, "--timeout=30s")


def test_the_service_range_is_blackholed(kube: Any) -> None:
    cluster = kube.require_local()
    route = subprocess.run(
        ["ip", "route", "show", "exact", cluster.config.service_cidr],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert route.split()[0] == "blackhole"
