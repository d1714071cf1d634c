"""A pod from a locally built image runs, is reachable from the host, and has logs and exec."""

from __future__ import annotations

import urllib.request
from typing import Any


def _running_ip(node_cluster: Any, namespace: str, name: str) -> str | None:
    pod = node_cluster.kubectl.json("get", "pod", name, "-n", namespace)
    status = pod["status"]
    if status.get("phase") == "Running" and status.get("podIP"):
        return str(status["podIP"])
    return None


def test_pod_runs_serves_the_host_and_answers_logs_and_exec(
    node_cluster: Any, node_namespace: str
) -> None:
    image = node_cluster.images["python-base"]
    node_cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "web", "namespace": node_namespace},
            "spec": {
                "containers": [
                    {
                        "name": "web",
                        "image": image.ref,
                        "imagePullPolicy": "Never",
                        "command": ["python3", "-m", "http.server", "8080"],
                        "resources": {"limits": {"memory": "128Mi", "cpu": "500m"}},
                    }
                ]
            },
        },
    )
    ip = node_cluster.wait_for(
        lambda: _running_ip(node_cluster, node_namespace, "web"), 60, "pod web Running"
    )
    [spec] = node_cluster.nodes
    assert ip.startswith(spec.pod_subnet.rsplit(".", 1)[0] + ".")

    # The host reaches the pod at its IP (through the node's bridge).
    def fetch() -> int | None:
        try:
            with urllib.request.urlopen(f"http://{ip}:8080/", timeout=2) as resp:
                return int(resp.status)
        except OSError:
            return None

    assert node_cluster.wait_for(fetch, 30, f"HTTP 200 from {ip}:8080") == 200

    logs = node_cluster.wait_for(
        lambda: (
            node_cluster.kubectl.run("logs", "web", "-n", node_namespace).stdout
            if "GET / HTTP" in node_cluster.kubectl.run("logs", "web", "-n", node_namespace).stdout
            else None
        ),
        30,
        "the request in kubectl logs",
    )
    assert "Serving HTTP on" in logs

    out = node_cluster.kubectl.run(
        "exec",
        "web",
        "-n",
        node_namespace,
        "--",
        "python3",
        "-c",
        "import os; print(os.getuid(), 6 * 7)",
    ).stdout
    assert out.split() == ["0", "42"]
