"""Fixtures of the security tier: KubeVirt's own service accounts, as their pods hold them."""

from __future__ import annotations

import json
import secrets
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from kv_cluster import Kubectl
from kv_cluster.slots import private_env
from virt_operator.components import COMPONENTS_DIR

__all__: list[str] = []

REPO_ROOT = Path(__file__).resolve().parents[2]
HANDLER_RBAC = COMPONENTS_DIR / "virt-handler" / "rbac.yaml"
NAMESPACE = COMPONENTS_DIR / "virt-api" / "namespace.yaml"


def _token_kubeconfig(admin: Path, token: str, out: Path) -> Path:
    """A kubeconfig for the cluster `admin` names, authenticating with `token` only."""
    config: dict[str, Any] = yaml.safe_load(admin.read_text())
    context = next(c for c in config["contexts"] if c["name"] == config["current-context"])
    config["users"] = [{"name": context["context"]["user"], "user": {"token": token}}]
    out.write_text(yaml.safe_dump(config))
    return out


@dataclass(frozen=True)
class Handler:
    """kubectl as virt-handler on node `own`; `other` is a node it must not touch."""

    kubectl: Kubectl
    own: str
    other: str
    #: The handler's own write (virt_handler.heartbeat): kubevirt.io keys only.
    heartbeat: Any = field(default_factory=lambda: HEARTBEAT)

    def patch_node(
        self, name: str, patch: Any, dry_run: bool = False
    ) -> subprocess.CompletedProcess[str]:
        extra = ["--dry-run=server"] if dry_run else []
        return self.kubectl.run(
            "patch", "node", name, "--type=merge", "-p", json.dumps(patch), *extra, check=False
        )

    def wait_for_the_restriction(self, timeout: float = 30.0) -> str:
        """A new policy takes a moment to load: dry-run another node's heartbeat until
        it is refused (a dry run changes nothing). The refusal's message."""
        deadline = time.monotonic() + timeout
        while True:
            tried = self.patch_node(self.other, HEARTBEAT, dry_run=True)
            if tried.returncode != 0 or time.monotonic() > deadline:
                return tried.stderr or tried.stdout
            time.sleep(0.2)


#: The handler's own write (virt_handler.heartbeat): kubevirt.io keys only.
HEARTBEAT = {
    "metadata": {
        "annotations": {"kubevirt.io/heartbeat": "2026-12-01T00:00:00Z"},
        "labels": {"kubevirt.io/schedulable": "false"},
    }
}


# These tests create Nodes and apply the handler's RBAC client-side: on the session's
# cluster that left fake nodes its handler DaemonSet waited for and fields kv-cluster's
# server-side apply then conflicted on. They get a node-less control plane of their own.
PRIVATE_ENV = private_env("security", kube_proxy=False)


@pytest.fixture(scope="module")
def private_env() -> dict[str, str]:
    return PRIVATE_ENV


@pytest.fixture(scope="module")
def kube(private_control_plane: Any) -> Any:
    """This tier's own control plane (it shadows the session's `kube`)."""
    return private_control_plane


def _apply(kubectl: Kubectl, body: dict[str, Any]) -> None:
    kubectl.run("apply", "-f", "-", stdin=json.dumps(body))


@pytest.fixture
def handler(kube: Any, tmp_path: Path) -> Iterator[Handler]:
    """virt-handler's service account with the token its DaemonSet pod on a node gets."""
    kubectl: Kubectl = kube.kubectl
    kubectl.run("apply", "-f", str(NAMESPACE))
    kubectl.run("apply", "-f", str(HANDLER_RBAC))
    suffix = secrets.token_hex(3)
    own, other, pod = f"sec-own-{suffix}", f"sec-other-{suffix}", f"virt-handler-{suffix}"
    for node in (own, other):
        _apply(kubectl, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}})
        kubectl.run("label", "node", node, "example.com/zone=a")
    # The pod is never started (no kubelet runs for these nodes); its token is what counts.
    _apply(
        kubectl,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": pod, "namespace": "kubevirt"},
            "spec": {
                "serviceAccountName": "kubevirt-handler",
                "nodeName": own,
                "containers": [{"name": "virt-handler", "image": "virt-handler"}],
            },
        },
    )
    uid = kubectl.run("get", "pod", pod, "-n", "kubevirt", "-o", "jsonpath={.metadata.uid}")
    token = kubectl.run(
        "create",
        "token",
        "kubevirt-handler",
        "-n",
        "kubevirt",
        "--bound-object-kind=Pod",
        f"--bound-object-name={pod}",
        f"--bound-object-uid={uid.stdout.strip()}",
    ).stdout.strip()
    config = _token_kubeconfig(kube.kubeconfig, token, tmp_path / "handler.kubeconfig")
    try:
        yield Handler(Kubectl(config, kubectl.binary), own, other)
    finally:
        kubectl.run("delete", "pod", pod, "-n", "kubevirt", "--wait=false", check=False)
        kubectl.run("delete", "node", own, other, "--wait=false", check=False)
