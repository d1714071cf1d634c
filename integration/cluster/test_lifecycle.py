"""A private cluster through the real CLI: up, idempotent up, status, kubeconfig, down.

`down` stops exactly the processes `up` started, removes the state dir and undoes the host
changes it made, and leaves every other process alone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from kv_cluster import ProcessRecord
from kv_cluster.slots import private_env

PRIVATE = {
    **private_env("lifecycle"),
    "KV_CLUSTER_VIRT_API": "0",
    "KV_CLUSTER_VIRT_NODE": "0",
}


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kv_cluster.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _records(state: Path) -> dict[str, ProcessRecord]:
    found = {}
    for path in (state / "run").glob("*.json"):
        record = ProcessRecord.load(path)
        if record is not None:
            found[record.name] = record
    return found


def _ip(*args: str) -> str:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=True).stdout


def test_up_is_idempotent_and_down_removes_only_what_up_made(kube: Any) -> None:
    cluster = kube.require_local()  # the binaries are built; a private cluster needs `ip`
    # Not tmp_path: concurrent pytest sessions on a shared machine prune each other's
    # basetemp dirs, which would take the pid records from under a running cluster.
    state = cluster.config.state_dir.parent / f"test-lifecycle-{os.getpid()}"
    env = {**os.environ, **PRIVATE, "KV_CLUSTER_STATE_DIR": str(state)}
    env.pop("KUBECONFIG", None)
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    try:
        first = _cli(env, "up", "--no-crds", "--nodes", "0")
        assert first.returncode == 0, first.stderr
        assert "kv-cluster: up in " in first.stdout
        started = _records(state)
        assert {"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} <= set(
            started
        )
        assert all(r.alive() for r in started.values())

        again = _cli(env, "up", "--no-crds", "--nodes", "0")
        assert again.returncode == 0, again.stderr
        assert "started" not in again.stdout.split("(", 1)[1]
        assert {n: r.pid for n, r in _records(state).items()} == {
            n: r.pid for n, r in started.items()
        }

        status = _cli(env, "status")
        assert status.returncode == 0, status.stdout
        assert "UNHEALTHY" not in status.stdout
        kubeconfig = _cli(env, "kubeconfig").stdout.strip()
        assert kubeconfig == str(state / "kubeconfig" / "admin.conf")
        assert "10.95.0.31/32" in _ip("-o", "addr", "show", "dev", "lo")
        added = json.loads((state / "hostnet.json").read_text())

        down = _cli(env, "down")
        assert down.returncode == 0, down.stderr
        assert not any(r.alive() for r in started.values())
        assert not state.exists()
        assert "10.95.0.31/32" not in _ip("-o", "addr", "show", "dev", "lo")
        for cidr in added.get("blackholes", []):
            assert _ip("route", "show", "exact", cidr).strip() == ""
        assert bystander.poll() is None
        assert cluster.status()[0].health.ok  # the shared cluster never noticed
    finally:
        _cli(env, "down")
        bystander.kill()
        bystander.wait()
