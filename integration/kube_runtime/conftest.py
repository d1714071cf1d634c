"""Fixtures for kube_runtime's integration tests.

All of them run on `private_cluster`: a kv-cluster of their own (state dir, ports, host
address and service CIDR apart from the shared one), because some restart, SIGSTOP or
compact the control plane, which must not disturb other tests on the shared cluster (and
faults injected there by others must not disturb these).
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import ssl
import sys
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kube_runtime import ClientSettings, KubeClient, Resource, connect
from kv_cluster import Cluster, KubeApiserver, Kubectl
from kv_cluster.crds import crd_files, crds_dir, install_crds
from kv_cluster.credentials import ensure_credentials
from kv_cluster.slots import private_env

NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)

# Private cluster settings (KV_RUNTIME_PORT_BASE / KV_RUNTIME_HOST_IP move them).
PRIVATE_ENV = private_env("kube-runtime")


@dataclass
class PrivateCluster:
    """A private control plane whose processes a test may stop, freeze and compact."""

    cluster: Cluster

    @property
    def kubeconfig(self) -> Path:
        return self.cluster.kubeconfig

    def apiserver(self) -> KubeApiserver:
        for component in self.cluster.components():
            if isinstance(component, KubeApiserver):
                return component
        raise AssertionError("no kube-apiserver component")

    def apiserver_pid(self) -> int:
        record = self.apiserver().record()
        assert record is not None, "kube-apiserver is not running"
        return record.pid

    def restart_apiserver(self) -> None:
        apiserver = self.apiserver()
        apiserver.stop()
        apiserver.start()

    def _etcd(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        creds = ensure_credentials(self.cluster.config, self.cluster.layout)
        context = ssl.create_default_context(cafile=str(creds.etcd_ca.paths.cert))
        context.load_cert_chain(
            str(creds.apiserver_etcd_client.cert), str(creds.apiserver_etcd_client.key)
        )
        port = self.cluster.config.ports.etcd_client
        request = urllib.request.Request(
            f"https://127.0.0.1:{port}{path}",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, context=context, timeout=10) as response:
            result: dict[str, Any] = json.load(response)
        return result

    def compact_etcd(self) -> int:
        """Compact etcd's history up to its current revision; returns that revision."""
        key = base64.b64encode(b"/registry/").decode()
        header = self._etcd("/v3/kv/range", {"key": key, "limit": 1})["header"]
        revision = int(header["revision"])
        self._etcd("/v3/kv/compaction", {"revision": str(revision), "physical": True})
        return revision


@pytest.fixture(scope="session")
def private_cluster(external_kubeconfig: Path | None) -> Iterator[PrivateCluster]:
    """The private cluster; taken down at the end unless KV_CLUSTER_KEEP=1."""
    if external_kubeconfig is not None:
        pytest.skip("kube_runtime tests run a private local kv-cluster, not another one")
    env = {**os.environ, **PRIVATE_ENV}
    cluster = Cluster.from_env(env, progress=sys.stderr)
    # Control plane only: no kube-proxy clash, and no KubeVirt (its CRDs are not wanted here).
    cluster.up(install=False, nodes=0, kubevirt=False)
    try:
        yield PrivateCluster(cluster)
    finally:
        if os.environ.get("KV_CLUSTER_KEEP") != "1":
            cluster.down()


@pytest.fixture(scope="session")
def private_crds(private_cluster: PrivateCluster) -> list[str]:
    """KubeVirt's CRDs (manifests/crds) installed on the private cluster."""
    files = crd_files(crds_dir(start=Path(__file__).resolve().parent))
    if not files:
        pytest.skip("no CRDs in manifests/crds yet")
    return install_crds(Kubectl(private_cluster.kubeconfig), files)


@pytest.fixture
async def clients() -> AsyncIterator[Callable[..., Awaitable[KubeClient]]]:
    """A factory of KubeClients for a kubeconfig; every one is closed after the test."""
    opened: list[KubeClient] = []

    async def make(kubeconfig: Path, **settings: Any) -> KubeClient:
        client = await connect(kubeconfig, settings=ClientSettings(**settings))
        opened.append(client)
        return client

    yield make
    for client in opened:
        await client.close()


@pytest.fixture
async def private_namespace(
    private_cluster: PrivateCluster, clients: Callable[..., Awaitable[KubeClient]]
) -> str:
    """A fresh namespace on the private fault cluster."""
    client = await clients(private_cluster.kubeconfig)
    name = f"kr-{secrets.token_hex(4)}"
    await client.create(NAMESPACES, {"metadata": {"name": name}})
    return name
