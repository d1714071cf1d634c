"""Fixtures for virt-api against the real control plane: virt-api as `kv-cluster up` runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class VirtApiEndpoint:
    """Where virt-api listens on the host, and the CA of its serving certificate."""

    host: str
    port: int
    ca: Path


@pytest.fixture(scope="session")
def virt_api(kube: Any) -> VirtApiEndpoint:
    """virt-api started and registered by the cluster's `up` (skips on an external cluster)."""
    from kv_cluster.kubevirt import VirtApi
    from kv_cluster.kubevirt_pods import KubevirtPods, virt_api_ca_file

    cluster = kube.require_local()
    kube.require_crds()
    if os.environ.get("KV_CLUSTER_VIRT_API") == "0":
        pytest.skip("KV_CLUSTER_VIRT_API=0: virt-api is not run by kv-cluster")
    # Host mode runs a VirtApi process; pods and operator mode a Deployment published on the
    # same address.
    component = next(c for c in cluster.components() if isinstance(c, (VirtApi, KubevirtPods)))
    status = component.status()
    assert status.running, f"virt-api is not running: {status.health.detail}"
    component.register()
    port = component.virt_api_port if isinstance(component, KubevirtPods) else component.port
    return VirtApiEndpoint(cluster.config.host_ip, port, virt_api_ca_file(cluster._context()))


@pytest.fixture
def apply(kube: Any, namespace: str) -> Callable[..., subprocess.CompletedProcess[str]]:
    """`kubectl apply -f -` of objects into the test namespace (check=False: tests read the result)."""

    def run(
        *objects: dict[str, Any], ns: str | None = namespace, dry_run: bool = False
    ) -> subprocess.CompletedProcess[str]:
        """`dry_run`: admitted (both webhooks run) and printed as JSON, never stored."""
        text = yaml.safe_dump_all(list(objects))
        args = ["apply", "-f", "-"] + (["-n", ns] if ns else [])
        if dry_run:
            args += ["--dry-run=server", "-o", "json"]
        result: subprocess.CompletedProcess[str] = kube.kubectl.run(*args, stdin=text, check=False)
        return result

    return run


def _virtctl(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "virtctl", *args, f"--kubeconfig={kubeconfig}"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO_ROOT,
    )


@pytest.fixture
def user_kubeconfig(kube: Any, namespace: str, tmp_path: Path) -> Callable[[str], Path]:
    """A kubeconfig for a fresh service account `name` in the test namespace (no RBAC yet)."""

    def make(name: str) -> Path:
        kube.kubectl.run("create", "serviceaccount", name, "-n", namespace)
        token = kube.kubectl.run("create", "token", name, "-n", namespace).stdout.strip()
        admin = yaml.safe_load(Path(kube.kubeconfig).read_text())
        context = next(c for c in admin["contexts"] if c["name"] == admin["current-context"])[
            "context"
        ]
        cluster = next(c for c in admin["clusters"] if c["name"] == context["cluster"])
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [cluster],
            "users": [{"name": name, "user": {"token": token}}],
            "contexts": [
                {
                    "name": name,
                    "context": {"cluster": cluster["name"], "user": name, "namespace": namespace},
                }
            ],
            "current-context": name,
        }
        path = tmp_path / f"{name}.kubeconfig"
        path.write_text(yaml.safe_dump(config))
        return path

    return make


def _wait_for(check: Callable[[], Any], timeout: float = 30.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


@pytest.fixture
def virtctl() -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run `virtctl ARGS --kubeconfig=K` the way a user does (its own process)."""
    return _virtctl


@pytest.fixture
def wait_for() -> Callable[..., Any]:
    """Poll a check until it returns something truthy (a real condition, with a deadline)."""
    return _wait_for


@pytest.fixture
def get_json(kube: Any) -> Callable[..., Any]:
    """`kubectl get ARGS -o json`, decoded."""
    return lambda *args: json.loads(kube.kubectl.run("get", *args, "-o", "json").stdout)


def _launcher_pod(vmi: dict[str, Any], node: str) -> dict[str, Any]:
    """The VMI's launcher pod as virt-controller renders it (controller owner, labels,
    domain annotation, an emptyDir), bound to `node`; no kubelet runs it (it stays Pending)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"virt-launcher-{vmi['metadata']['name']}-abcde",
            "labels": {"kubevirt.io": "virt-launcher"},
            "annotations": {"kubevirt.io/domain": vmi["metadata"]["name"]},
            "ownerReferences": [
                {
                    "apiVersion": "kubevirt.io/v1",
                    "kind": "VirtualMachineInstance",
                    "name": vmi["metadata"]["name"],
                    "uid": vmi["metadata"]["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "nodeName": node,
            "containers": [{"name": "compute", "image": "virt-launcher"}],
            "volumes": [{"name": "sockets", "emptyDir": {}}],
        },
    }


@pytest.fixture
def evictable_vmi(
    namespace: str,
    apply: Callable[..., subprocess.CompletedProcess[str]],
    get_json: Callable[..., Any],
) -> Callable[[str], dict[str, Any]]:
    """Create the VMI `drained` (evictionStrategy LiveMigrate) and its launcher pod bound to
    a node (`_launcher_pod`); returns the pod as created."""

    def create(node: str) -> dict[str, Any]:
        body = {
            "apiVersion": "kubevirt.io/v1",
            "kind": "VirtualMachineInstance",
            "metadata": {"name": "drained"},
            "spec": {
                "evictionStrategy": "LiveMigrate",
                "domain": {"devices": {}, "resources": {"requests": {"memory": "64Mi"}}},
                # On a cluster whose virt-controller runs, its own launcher pod must never
                # bind: then it never reports a node of its own for this VMI.
                "nodeSelector": {"kvt.kubevirt-py.io/nowhere": "true"},
            },
        }
        result = apply(body)
        assert result.returncode == 0, result.stderr
        vmi: dict[str, Any] = get_json("vmi", "drained", "-n", namespace)
        pod = _launcher_pod(vmi, node)
        result = apply(pod)
        assert result.returncode == 0, result.stderr
        return pod

    return create
