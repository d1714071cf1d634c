"""Fixtures for the node's integration tests: the session's local cluster, with a real node.

They use the cluster of the root conftest's `kube` fixture (the one `kv-cluster up` makes)
and make sure it runs at least one node: kube-proxy's iptables chains are host-wide, so
only one cluster per host may run nodes. The images the tests run are built (or taken
from the cache) with kv-images and imported into the node's containerd first.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from kv_cluster import Cluster, Kubectl
from kv_cluster.nodes import NodeSpec, node_specs, read_node_count
from kv_images import (
    Builder,
    BuiltImage,
    Layout,
    Progress,
    find_workspace,
)

IMAGES = ("python-base", "launcher-base", "guest-kernel-boot")


@dataclass(frozen=True)
class NodeCluster:
    """The cluster under test: its kubectl, its node(s) and the images imported into them."""

    cluster: Cluster
    kubectl: Kubectl
    nodes: list[NodeSpec]
    images: dict[str, BuiltImage]

    @property
    def host_ip(self) -> str:
        return self.cluster.config.host_ip

    def apply(self, manifest: dict[str, Any]) -> None:
        self.kubectl.run("apply", "-f", "-", stdin=json.dumps(manifest))

    @staticmethod
    def wait_for(
        condition: Callable[[], Any], timeout: float, what: str, interval: float = 0.2
    ) -> Any:
        return wait_for(condition, timeout, what, interval)


def wait_for(condition: Callable[[], Any], timeout: float, what: str, interval: float = 0.2) -> Any:
    """Poll `condition` until it returns something truthy; fail naming `what` at the deadline."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = condition()
        if last:
            return last
        time.sleep(interval)
    pytest.fail(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")


@pytest.fixture(scope="session")
def node_cluster(kube: Any) -> NodeCluster:
    cluster: Cluster = kube.require_local()
    count = max(1, read_node_count(cluster.layout))
    cluster.up(nodes=count)
    nodes = node_specs(cluster.config, cluster.layout, count)
    builder = Builder(find_workspace(), Layout.default(), Progress())
    built = builder.build(IMAGES)
    for node in nodes:
        builder.import_into(built, node.containerd_socket)
    return NodeCluster(
        cluster=cluster,
        kubectl=Kubectl(cluster.kubeconfig),
        nodes=nodes,
        images={image.name: image for image in built},
    )


@pytest.fixture
def node_namespace(node_cluster: NodeCluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace on the private cluster, deleted afterwards."""
    stem = re.sub(r"[^a-z0-9-]+", "-", request.node.name.lower()).strip("-")[:40].strip("-")
    name = f"kvn-{stem}-{secrets.token_hex(3)}"
    node_cluster.kubectl.run("create", "namespace", name)
    yield name
    node_cluster.kubectl.run("delete", "namespace", name, "--wait=false", check=False)
