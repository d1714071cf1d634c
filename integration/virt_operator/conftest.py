"""Fixtures for virt-operator's integration tests: the operator as a host process on a
node-less control plane, reached by the API server through an EndpointSlice on the
cluster's host address, and one fake node whose pods the tests play Ready (no kubelet
runs them) so the install can become Deployed.

The tests bring up a private node-less control plane of their own (PRIVATE_ENV).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from kv_cluster.kubectl import Kubectl
from kv_cluster.slots import private_env

NODE = "kvo-node-0"
NAMESPACE = "kubevirt"
REPO = Path(__file__).resolve().parents[2]
RELEASE = REPO / "manifests" / "release"


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class PodPlayer:
    """Plays the fake node's kubelet: node heartbeat, and every pod bound to it Running and
    Ready (while `playing`)."""

    kubectl: Kubectl
    playing: threading.Event = field(default_factory=threading.Event)
    stop: threading.Event = field(default_factory=threading.Event)

    def node(self) -> None:
        amounts = {"cpu": "64", "memory": "512Gi", "pods": "200"}
        body = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": NODE, "labels": {"kubernetes.io/hostname": NODE}},
            "status": {"capacity": amounts, "allocatable": amounts},
        }
        self.kubectl.run("apply", "-f", "-", stdin=json.dumps(body))
        self.beat()

    def beat(self) -> None:
        condition = {
            "type": "Ready",
            "status": "True",
            "reason": "KubeletReady",
            "message": "fake node of virt-operator's integration tests",
            "lastHeartbeatTime": _now(),
            "lastTransitionTime": _now(),
        }
        self.kubectl.run(
            "patch",
            "node",
            NODE,
            "--subresource=status",
            "--type=merge",
            "-p",
            json.dumps({"status": {"conditions": [condition]}}),
            check=False,
        )

    def play_pods(self) -> None:
        found = self.kubectl.run(
            "get",
            "pods",
            "-n",
            NAMESPACE,
            "--field-selector",
            f"spec.nodeName={NODE}",
            "-o",
            "json",
            check=False,
        )
        if found.returncode != 0:
            return
        for pod in json.loads(found.stdout).get("items", []):
            name = pod["metadata"]["name"]
            if pod["metadata"].get("deletionTimestamp"):
                self.kubectl.run(
                    "delete",
                    "pod",
                    name,
                    "-n",
                    NAMESPACE,
                    "--grace-period=0",
                    "--force",
                    check=False,
                )
                continue
            if (pod.get("status") or {}).get("phase") == "Running":
                continue
            containers = [
                {
                    "name": c["name"],
                    "image": c["image"],
                    "imageID": "",
                    "ready": True,
                    "restartCount": 0,
                    "started": True,
                    "state": {"running": {"startedAt": _now()}},
                }
                for c in pod["spec"]["containers"]
            ]
            status = {
                "phase": "Running",
                "conditions": [
                    {"type": t, "status": "True", "lastTransitionTime": _now()}
                    for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
                ],
                "containerStatuses": containers,
                "startTime": _now(),
            }
            self.kubectl.run(
                "patch",
                "pod",
                name,
                "-n",
                NAMESPACE,
                "--subresource=status",
                "--type=merge",
                "-p",
                json.dumps({"status": status}),
                check=False,
            )

    def run(self) -> None:
        rounds = 0
        while not self.stop.is_set():
            if rounds % 5 == 0:
                self.beat()
            if self.playing.is_set():
                self.play_pods()
            rounds += 1
            self.stop.wait(1.0)


@dataclass
class Operator:
    kubectl: Kubectl
    kubeconfig: Path
    player: PodPlayer
    process: subprocess.Popen[bytes]
    log: Path

    def kubevirt(self) -> dict[str, Any]:
        found = self.kubectl.run("get", "kv", "kubevirt", "-n", NAMESPACE, "-o", "json")
        body: dict[str, Any] = json.loads(found.stdout)
        return body

    def conditions(self) -> dict[str, tuple[str, str]]:
        status = self.kubevirt().get("status") or {}
        return {c["type"]: (c["status"], c["reason"]) for c in status.get("conditions", [])}

    def get(self, kind: str, name: str, namespace: str | None = NAMESPACE) -> dict[str, Any] | None:
        args = ["get", kind, name, "-o", "json", "--ignore-not-found"]
        if namespace:
            args += ["-n", namespace]
        found = self.kubectl.run(*args)
        return json.loads(found.stdout) if found.stdout.strip() else None

    def wait(self, what: str, check: Any, timeout: float = 60.0) -> Any:
        """Poll `check()` until it is truthy; fail naming `what` and the log's tail."""
        deadline = time.monotonic() + timeout
        while True:
            value = check()
            if value:
                return value
            if time.monotonic() > deadline:
                tail = "\n".join(self.log.read_text().splitlines()[-15:])
                pytest.fail(f"{what} not within {timeout:.0f}s; operator log:\n{tail}")
            assert self.process.poll() is None, "the operator exited"
            time.sleep(0.5)


def _release_without_operator_deployment() -> str:
    # The operator runs as a host process here: the release's own Deployment would only
    # be a second operator on the fake node.
    docs = [
        d
        for d in yaml.safe_load_all((RELEASE / "kubevirt-operator.yaml").read_text())
        if d and d["kind"] != "Deployment"
    ]
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": docs})


# The operator installs KubeVirt itself, so it gets a control plane of its own: never the
# session's cluster, whose kubevirt namespace kv-cluster deployed (the CI run where these
# tests shared it broke both).
PRIVATE_ENV = private_env("virt-operator", kube_proxy=False)


@pytest.fixture(scope="module")
def private_env() -> dict[str, str]:
    return PRIVATE_ENV


@pytest.fixture(scope="module")
def operator(
    private_control_plane: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Operator]:
    kube = private_control_plane
    kubectl: Kubectl = kube.kubectl
    host = urlsplit(
        yaml.safe_load(Path(kube.kubeconfig).read_text())["clusters"][0]["cluster"]["server"]
    ).hostname
    assert host
    player = PodPlayer(kubectl)
    player.node()
    thread = threading.Thread(target=player.run, daemon=True)
    thread.start()
    kubectl.run(
        "apply",
        "--server-side",
        "--force-conflicts",
        "-f",
        "-",
        stdin=_release_without_operator_deployment(),
    )
    webhook_port = _free_port(host)
    # The operator's Service selects its pods; this slice adds the host process.
    kubectl.run(
        "apply",
        "-f",
        "-",
        stdin=json.dumps(
            {
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": {
                    "name": "kubevirt-operator-webhook-host",
                    "namespace": NAMESPACE,
                    "labels": {"kubernetes.io/service-name": "kubevirt-operator-webhook"},
                },
                "addressType": "IPv4",
                "endpoints": [{"addresses": [host], "conditions": {"ready": True}}],
                "ports": [{"name": "webhooks", "port": webhook_port, "protocol": "TCP"}],
            }
        ),
    )
    log = tmp_path_factory.mktemp("operator") / "virt-operator.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "virt_operator",
                f"--kubeconfig={kube.kubeconfig}",
                "--leader-elect=false",
                f"--bind={host}",
                f"--port={_free_port(host)}",
                f"--webhook-port={webhook_port}",
                "--image=docker.io/kubevirt-py/virt-operator:itest",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    try:
        yield Operator(kubectl, Path(kube.kubeconfig), player, process, log)
    finally:
        process.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(20)
        if process.poll() is None:
            process.kill()
        player.stop.set()
        thread.join(10)
        kubectl.run("delete", "node", NODE, "--ignore-not-found", "--wait=false", check=False)
        kubectl.run(
            "delete",
            "endpointslice",
            "kubevirt-operator-webhook-host",
            "-n",
            NAMESPACE,
            "--ignore-not-found",
            check=False,
        )
