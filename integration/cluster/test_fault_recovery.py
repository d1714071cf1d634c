"""Killing etcd or kube-apiserver loses nothing: `kv-cluster up` brings it back.

The test kills processes, so it runs a private control plane of its own (other ports,
host address and ranges) rather than the cluster other tests and engineers share.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kv_cluster import Cluster, Kubectl
from kv_cluster.slots import private_env

EXAMPLES = Path(__file__).resolve().parents[2] / "compat" / "upstream-kubevirt" / "examples"
PRIVATE = {
    **private_env("fault-recovery"),
    "KV_CLUSTER_VIRT_API": "0",
    "KV_CLUSTER_VIRT_NODE": "0",
}


@dataclass(frozen=True)
class Private:
    env: dict[str, str]
    cluster: Cluster
    kubectl: Kubectl
    has_crds: bool


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kv_cluster.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def private(kube: Any) -> Iterator[Private]:
    shared = kube.require_local()  # needs the local binaries and root for `ip`
    # Not tmp_path: concurrent pytest sessions prune each other's basetemp dirs.
    state = shared.config.state_dir.parent / f"test-faults-{os.getpid()}"
    env = {**os.environ, **PRIVATE, "KV_CLUSTER_STATE_DIR": str(state)}
    env.pop("KUBECONFIG", None)
    up = _cli(env, "up", "--nodes", "0")
    try:
        assert up.returncode == 0, up.stderr
        cluster = Cluster.from_env(env)
        yield Private(env, cluster, Kubectl(cluster.kubeconfig), "CRDs applied" in up.stderr)
    finally:
        _cli(env, "down")


@pytest.mark.parametrize("component", ["etcd", "kube-apiserver"])
def test_up_restores_a_killed_component_with_its_objects(private: Private, component: str) -> None:
    kubectl = private.kubectl
    namespace = f"faults-{component}"
    kubectl.run("create", "namespace", namespace)
    kubectl.run("create", "configmap", "survivor", "-n", namespace, "--from-literal=token=kept")
    before = kubectl.json("get", "configmap", "survivor", "-n", namespace)
    if private.has_crds:  # a custom resource too
        kubectl.run("create", "-n", namespace, "-f", str(EXAMPLES / "vm-cirros.yaml"))
        vm_before = kubectl.json("get", "vm", "vm-cirros", "-n", namespace)

    victim = next(c for c in private.cluster.components() if c.name == component)
    record = victim.record()
    assert record is not None
    assert record.alive()
    os.kill(record.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while record.alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not victim.status().running
    assert _cli(private.env, "status").returncode == 1

    up = _cli(private.env, "up", "--no-crds", "--nodes", "0")
    assert up.returncode == 0, up.stderr
    assert f"{component} restarted" in up.stdout

    restored = victim.record()
    assert restored is not None
    assert restored.pid != record.pid
    assert restored.alive()
    after = kubectl.json("get", "configmap", "survivor", "-n", namespace)
    assert after["metadata"]["uid"] == before["metadata"]["uid"]
    assert after["data"] == {"token": "kept"}
    if private.has_crds:
        vm_after = kubectl.json("get", "vm", "vm-cirros", "-n", namespace)
        assert vm_after["metadata"]["uid"] == vm_before["metadata"]["uid"]
        assert vm_after["spec"] == vm_before["spec"]


def test_up_on_a_healthy_cluster_changes_nothing(private: Private) -> None:
    pids = _pids(private.cluster)
    up = _cli(private.env, "up", "--no-crds", "--nodes", "0")
    assert up.returncode == 0, up.stderr
    assert "etcd running" in up.stdout
    assert "kube-apiserver running" in up.stdout
    assert _pids(private.cluster) == pids


def _pids(cluster: Cluster) -> dict[str, int]:
    records = {c.name: c.record() for c in cluster.components()}
    return {name: r.pid for name, r in records.items() if r is not None}
