"""The node registers with the control plane and becomes Ready."""

from __future__ import annotations

from typing import Any


def _ready(node_cluster: Any, name: str) -> bool:
    node = node_cluster.kubectl.json("get", "node", name)
    conditions = {c["type"]: c["status"] for c in node["status"].get("conditions", [])}
    return conditions.get("Ready") == "True"


def test_node_is_ready_with_the_host_address(node_cluster: Any) -> None:
    [spec] = node_cluster.nodes
    node_cluster.wait_for(lambda: _ready(node_cluster, spec.name), 60, f"node {spec.name} Ready")
    node = node_cluster.kubectl.json("get", "node", spec.name)
    addresses = {a["type"]: a["address"] for a in node["status"]["addresses"]}
    assert addresses["InternalIP"] == node_cluster.host_ip
    assert node["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("containerd://")
    assert node["status"]["nodeInfo"]["kubeletVersion"] == "v1.37.2"
