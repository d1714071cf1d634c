"""`--nodes 2` adds a second node with its own kubelet and containerd; pods on the two
nodes reach each other directly and through a Service; scaling back removes it."""

from __future__ import annotations

import json
from typing import Any

from kv_cluster.nodes import node_specs, read_node_count
from kv_images import Builder, Layout, Progress, find_workspace

_FETCH = """
import sys, urllib.request
for url in sys.argv[1:]:
    print(urllib.request.urlopen(url, timeout=5).status)
"""


def _pod(name: str, namespace: str, node: str, image: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": name}},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "web",
                    "image": image,
                    "imagePullPolicy": "Never",
                    "command": ["python3", "-m", "http.server", "8080"],
                }
            ],
        },
    }


def test_second_node_runs_pods_that_reach_the_first(node_cluster: Any, node_namespace: str) -> None:
    cluster = node_cluster.cluster
    kubectl = node_cluster.kubectl
    before = read_node_count(cluster.layout)
    cluster.up(nodes=2)
    try:
        first, second = node_specs(cluster.config, cluster.layout, 2)
        builder = Builder(find_workspace(), Layout.default(), Progress())
        [image] = builder.build(["python-base"])
        builder.import_into([image], second.containerd_socket)
        assert first.containerd_socket != second.containerd_socket
        assert first.kubelet_root != second.kubelet_root

        def ready() -> bool:
            node = kubectl.json("get", "node", second.name)
            return any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in node["status"].get("conditions", [])
            )

        node_cluster.wait_for(ready, 60, f"{second.name} Ready")
        for name, spec in (("a", first), ("b", second)):
            node_cluster.apply(_pod(name, node_namespace, spec.name, image.ref))
        node_cluster.apply(
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "b", "namespace": node_namespace},
                "spec": {"selector": {"app": "b"}, "ports": [{"port": 80, "targetPort": 8080}]},
            }
        )

        def ip(name: str) -> str | None:
            pod = kubectl.json("get", "pod", name, "-n", node_namespace)
            running = pod["status"].get("phase") == "Running"
            return str(pod["status"]["podIP"]) if running and pod["status"].get("podIP") else None

        node_cluster.wait_for(lambda: ip("a"), 60, "pod a Running")
        b_ip = node_cluster.wait_for(lambda: ip("b"), 60, "pod b Running")
        assert b_ip.startswith(second.pod_subnet.rsplit(".", 1)[0] + ".")
        urls = [f"http://{b_ip}:8080/", f"http://b.{node_namespace}.svc.cluster.local/"]

        def fetched() -> list[str] | None:
            proc = kubectl.run(
                "exec", "a", "-n", node_namespace, "--", "python3", "-c", _FETCH, *urls, check=False
            )
            return proc.stdout.split() if proc.returncode == 0 else None

        assert node_cluster.wait_for(fetched, 30, "pod a fetching from pod b") == ["200", "200"]
    finally:
        cluster.up(nodes=max(1, before))
    names = [
        n["metadata"]["name"]
        for n in json.loads(kubectl.run("get", "nodes", "-o", "json").stdout)["items"]
    ]
    if before < 2:
        assert second.name not in names
        assert not second.containerd_socket.exists()
