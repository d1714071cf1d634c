"""Fixtures for virt-controller's integration tests.

They run on a private kv-cluster (own state dir, ports, host address and CIDRs): the tests
add a Node object that advertises KubeVirt's device resources and accepts any pod, which
must not attract other tests' pods on the shared cluster, and they kill controllers.
Until the real node exists, the fake node's Lease is renewed here so the node lifecycle
controller keeps it Ready; no kubelet ever runs its pods (they stay bound, not running).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kube_runtime import (
    LEASES,
    NODES,
    PODS,
    ApiError,
    ClientSettings,
    KubeClient,
    Resource,
    connect,
)
from kv_cluster import Cluster
from kv_cluster.kubectl import Kubectl
from kv_cluster.slots import private_env
from virt_operator.components import COMPONENTS_DIR

NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
NODE_NAME = "kvc-node-0"
# Two schedulable nodes (a migration needs a target); tests may add more to FAKE_NODES.
NODE_NAMES = ("kvc-node-0", "kvc-node-1")
FAKE_NODES: set[str] = set(NODE_NAMES)
DEVICES = ("devices.kubevirt.io/kvm", "devices.kubevirt.io/tun", "devices.kubevirt.io/vhost-net")

PRIVATE_ENV = private_env("virt-controller")
# The private cluster runs neither virt-api nor a virt-controller of its own.


def fake_node(name: str, pods: int = 1000) -> dict[str, Any]:
    """A Node as a kubelet with KubeVirt's device plugins would register it."""
    amounts = {"cpu": "64", "memory": "512Gi", "pods": str(pods)}
    amounts.update({d: "1000" for d in DEVICES})
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, "kubevirt.io/schedulable": "true"},
        },
        "status": {"capacity": amounts, "allocatable": amounts},
    }


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _ready_condition() -> dict[str, Any]:
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "type": "Ready",
        "status": "True",
        "reason": "KubeletReady",
        "message": "fake node of virt-controller's integration tests",
        "lastHeartbeatTime": now,
        "lastTransitionTime": now,
    }


@dataclass
class ControllerCluster:
    cluster: Cluster

    @property
    def kubeconfig(self) -> Path:
        return self.cluster.kubeconfig


def _up(env: dict[str, str]) -> Cluster:
    """The control plane and the CRDs, without KubeVirt's own components: the tests run
    virt-controller themselves."""
    cluster = Cluster.from_env(env, progress=sys.stderr)
    cluster.up(kubevirt=False)
    return cluster


def _keep_node_alive(kubeconfig: Path, stop: threading.Event) -> None:
    """Play the kubelet's API part: renew the node's Lease and Ready condition (every 5 s)
    and finish the deletion of its pods (a kubelet does once their containers stopped)."""

    async def beat() -> None:
        client = await connect(kubeconfig, settings=ClientSettings(qps=50, burst=100))
        rounds = 0
        async with client:
            while not stop.is_set():
                rounds += 1
                with contextlib.suppress(ApiError, OSError, TimeoutError):
                    await _finish_deletions(client)
                if rounds % 5 != 1:
                    await asyncio.to_thread(stop.wait, 1.0)
                    continue
                for name in sorted(FAKE_NODES):
                    await _renew(client, name)
                await asyncio.to_thread(stop.wait, 1.0)

    asyncio.run(beat())


async def _renew(client: KubeClient, name: str) -> None:
    try:
        await client.patch_status(NODES, name, {"conditions": [_ready_condition()]})
        lease = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": name, "namespace": "kube-node-lease"},
            "spec": {
                "holderIdentity": name,
                "leaseDurationSeconds": 40,
                "renewTime": _now(),
            },
        }
        await client.apply(LEASES, lease, field_manager="kvc-fake-kubelet", force=True)
    except (ApiError, OSError, TimeoutError):
        pass


async def _finish_deletions(client: KubeClient) -> None:
    body = await client.list(PODS)
    for pod in body.get("items") or ():
        meta = pod["metadata"]
        if meta.get("deletionTimestamp") and pod["spec"].get("nodeName") in FAKE_NODES:
            try:
                await client.request(
                    "DELETE",
                    PODS.path(meta["namespace"], meta["name"]),
                    body={"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0},
                    verb="delete",
                    resource="pods",
                )
            except ApiError as exc:
                if not exc.not_found:
                    raise


async def add_fake_node(client: KubeClient, name: str, **annotations: str) -> None:
    """Register a fake node (Ready, with device resources); the fixture keeps it Ready."""
    body = fake_node(name)
    if annotations:
        body["metadata"]["annotations"] = annotations
    try:
        await client.create(NODES, body)
    except ApiError as exc:
        if not exc.conflict:
            raise
    status = {**body["status"], "conditions": [_ready_condition()]}
    await client.merge_patch(NODES, name, {"status": status}, subresource="status")
    FAKE_NODES.add(name)


@pytest.fixture(scope="session")
def controller_cluster(external_kubeconfig: Path | None) -> Iterator[ControllerCluster]:
    """The private cluster with one fake KubeVirt node kept Ready."""
    if external_kubeconfig is not None:
        pytest.skip("virt-controller tests run a private local kv-cluster, not another one")
    cluster = _up({**os.environ, **PRIVATE_ENV})
    kubectl = Kubectl(cluster.kubeconfig)
    kubectl.run("create", "namespace", "kubevirt", check=False)

    async def add_nodes() -> None:
        client = await connect(cluster.kubeconfig)
        async with client:
            for name in NODE_NAMES:
                await add_fake_node(client, name)

    asyncio.run(add_nodes())
    stop = threading.Event()
    beater = threading.Thread(target=_keep_node_alive, args=(cluster.kubeconfig, stop), daemon=True)
    beater.start()
    try:
        yield ControllerCluster(cluster)
    finally:
        stop.set()
        beater.join(timeout=10)
        if os.environ.get("KV_CLUSTER_KEEP") != "1":
            cluster.down()


@pytest.fixture
async def client(controller_cluster: ControllerCluster) -> AsyncIterator[KubeClient]:
    c = await connect(controller_cluster.kubeconfig, settings=ClientSettings(qps=100, burst=200))
    async with c:
        yield c


@pytest.fixture
async def namespace(client: KubeClient, request: pytest.FixtureRequest) -> AsyncIterator[str]:
    name = f"kvc-{secrets.token_hex(4)}"
    await client.create(NAMESPACES, {"metadata": {"name": name}})
    yield name
    with contextlib.suppress(ApiError):
        await client.delete(NAMESPACES, name)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ControllerProcess:
    """virt-controller as a subprocess of the test (so it can be killed with SIGKILL)."""

    def __init__(self, kubeconfig: Path, log_dir: Path, *extra: str) -> None:
        self.kubeconfig = kubeconfig
        self.log_dir = log_dir
        self.extra = list(extra)
        self.port = _free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        log = (self.log_dir / f"virt-controller-{self.starts}.log").open("wb")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "virt_controller",
                f"--kubeconfig={self.kubeconfig}",
                "--bind=127.0.0.1",
                f"--port={self.port}",
                "--lease-duration=4",
                "--renew-deadline=3",
                "--retry-period=1",
                "--use-emulation=false",
                *self.extra,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        log.close()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()

    def logs(self) -> str:
        return "\n".join(
            p.read_text(errors="replace")[-4000:] for p in sorted(self.log_dir.glob("*.log"))
        )


@pytest.fixture
def controller_factory(
    controller_cluster: ControllerCluster, tmp_path: Path
) -> Iterator[Callable[[Path], ControllerProcess]]:
    """Start extra controllers (e.g. with another kubeconfig); all stopped afterwards."""
    started: list[ControllerProcess] = []

    def start(kubeconfig: Path) -> ControllerProcess:
        log_dir = tmp_path / f"controller-{len(started)}"
        log_dir.mkdir()
        process = ControllerProcess(kubeconfig, log_dir)
        process.start()
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop()
        print(process.logs())


@pytest.fixture
def controller(
    controller_cluster: ControllerCluster, tmp_path: Path
) -> Iterator[ControllerProcess]:
    """A running virt-controller (leader election on, short lease); stopped afterwards."""
    # A short heartbeat timeout so the node controller's test need not wait minutes.
    process = ControllerProcess(
        controller_cluster.kubeconfig, tmp_path, "--node-heartbeat-timeout=30"
    )
    process.start()
    yield process
    process.stop()
    print(process.logs())  # shown by pytest when the test failed


async def eventually(
    probe: Callable[[], Awaitable[Any]], *, within: float = 60.0, what: str = "condition"
) -> Any:
    """Poll `probe` until it returns something truthy; fail with its last value at the deadline."""
    deadline = time.monotonic() + within
    last: Any = None
    while True:
        last = await probe()
        if last:
            return last
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}; last seen: {last!r}")
        await asyncio.sleep(0.25)


async def launcher_pods(client: KubeClient, namespace: str) -> list[dict[str, Any]]:
    body = await client.list(PODS, namespace, label_selector="kubevirt.io=virt-launcher")
    return list(body.get("items") or [])


async def get_or_none(client: KubeClient, resource: Resource, name: str, namespace: str) -> Any:
    try:
        return await client.get(resource, name, namespace)
    except ApiError as exc:
        if exc.not_found:
            return None
        raise


@dataclass(frozen=True)
class Helpers:
    """Polling and listing helpers, as a fixture (test modules cannot import conftest)."""

    eventually: Callable[..., Awaitable[Any]] = eventually
    launcher_pods: Callable[[KubeClient, str], Awaitable[list[dict[str, Any]]]] = launcher_pods
    get_or_none: Callable[..., Awaitable[Any]] = get_or_none
    node_name: str = NODE_NAME
    node_names: tuple[str, ...] = NODE_NAMES
    add_fake_node: Callable[..., Awaitable[None]] = add_fake_node


@pytest.fixture
def kv() -> Helpers:
    return Helpers()


@pytest.fixture
def sa_kubeconfig(controller_cluster: Any, tmp_path: Path) -> Path:
    """A kubeconfig with a token of the kubevirt-controller ServiceAccount (its RBAC as the
    operator installs it, components/virt-controller/rbac.yaml)."""
    admin = controller_cluster.kubeconfig
    kubectl = Kubectl(admin)
    kubectl.run("apply", "-f", str(COMPONENTS_DIR / "virt-controller" / "rbac.yaml"))
    token = kubectl.run(
        "create", "token", "kubevirt-controller", "-n", "kubevirt", "--duration=1h"
    ).stdout.strip()
    cluster = yaml.safe_load(admin.read_text())["clusters"][0]["cluster"]
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "kv", "cluster": cluster}],
        "users": [{"name": "virt-controller", "user": {"token": token}}],
        "contexts": [{"name": "kv", "context": {"cluster": "kv", "user": "virt-controller"}}],
        "current-context": "kv",
    }
    path = tmp_path / "virt-controller.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path
