"""Killing etcd or kube-apiserver loses nothing: `kv-cluster up` brings it back."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from kv_cluster import Kubectl

EXAMPLES = Path(__file__).resolve().parents[2] / "compat" / "upstream-kubevirt" / "examples"


def _up() -> str:
    out = subprocess.run(
        [sys.executable, "-m", "kv_cluster.cli", "up", "--no-crds"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.mark.parametrize("component", ["etcd", "kube-apiserver"])
def test_up_restores_a_killed_component_with_its_objects(
    kube: Any, kubectl: Kubectl, namespace: str, component: str
) -> None:
    cluster = kube.require_local()
    kubectl.run("create", "configmap", "survivor", "-n", namespace, "--from-literal=token=kept")
    before = kubectl.json("get", "configmap", "survivor", "-n", namespace)
    if kube.crds:  # a custom resource too, once manifests/crds exist
        kubectl.run("create", "-n", namespace, "-f", str(EXAMPLES / "vm-cirros.yaml"))
        vm_before = kubectl.json("get", "vm", "vm-cirros", "-n", namespace)

    victim = next(c for c in cluster.components() if c.name == component)
    record = victim.record()
    assert record is not None
    assert record.alive()
    os.kill(record.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while record.alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not victim.status().running

    out = _up()
    # Another session sharing the cluster may have restarted it first; either way it is back.
    assert f"{component} restarted" in out or f"{component} running" in out

    restored = victim.record()
    assert restored is not None
    assert restored.pid != record.pid
    assert restored.alive()
    after = kubectl.json("get", "configmap", "survivor", "-n", namespace)
    assert after["metadata"]["uid"] == before["metadata"]["uid"]
    assert after["data"] == {"token": "kept"}
    if kube.crds:
        vm_after = kubectl.json("get", "vm", "vm-cirros", "-n", namespace)
        assert vm_after["metadata"]["uid"] == vm_before["metadata"]["uid"]
        assert vm_after["spec"] == vm_before["spec"]


def test_up_on_a_healthy_cluster_changes_nothing(kube: Any) -> None:
    cluster = kube.require_local()
    pids = {c.name: c.record().pid for c in cluster.components()}  # type: ignore[union-attr]
    out = _up()
    assert "etcd running" in out
    assert "kube-apiserver running" in out
    assert {c.name: c.record().pid for c in cluster.components()} == pids  # type: ignore[union-attr]
