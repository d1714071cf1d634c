"""A node's containerd pulls kubevirt-py's images from the cluster's registry, and only there.

Two pull paths: `ctr images pull --hosts-dir` (the client resolves, as a human would) and
CRI `PullImage` over containerd's socket (what the kubelet calls; containerd resolves with
its own config_path). Both read the certs.d kv-cluster writes for every node.

No kubelet and no cluster: the fixture starts kv-cluster's `Registry` on a private address and port (its own state
dir, never the shared cluster's), pushes two kv-images images to it (built or cached), and
starts a standalone containerd rendered by kv-cluster's `Containerd` (the same config.toml
and certs.d a node gets, its own root/state/socket under the state dir). Nothing else of a
cluster runs. Settings: KV_REGISTRY_PORT_BASE (27980) and KV_REGISTRY_HOST_IP (10.95.0.33).
"""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from grpclib.client import Channel
from grpclib.const import Cardinality
from grpclib.encoding.base import CodecBase
from grpclib.exceptions import GRPCError
from kv_cluster import (
    ClusterConfig,
    ClusterContext,
    HostNetwork,
    Registry,
    StateLayout,
    ensure_credentials,
    registry_endpoint,
    registry_storage,
)
from kv_cluster.config import default_state_dir
from kv_cluster.containerd import NO_REGISTRY_PROXY, Containerd
from kv_cluster.node import NodeContainerd
from kv_cluster.nodes import NodeSpec
from kv_cluster.registry import registry_guard
from kv_cluster.slots import private_env
from kv_images import Builder, BuiltImage, HttpRegistry, Layout, Progress, find_workspace

_SLOT = private_env("registry-test")
PORT_BASE = _SLOT["KV_CLUSTER_PORT_BASE"]
HOST_IP = _SLOT["KV_CLUSTER_HOST_IP"]
IMAGES = ("pause", "guest-kernel-boot")
POD_CIDR = _SLOT["KV_CLUSTER_POD_CIDR"]


@dataclass(frozen=True)
class RegistryNode:
    """The running pair and what was pushed."""

    ctx: ClusterContext
    registry: Registry
    containerd: Containerd
    images: dict[str, BuiltImage]

    @property
    def socket(self) -> Path:
        return self.containerd.node.containerd_socket

    @property
    def hosts_dir(self) -> Path:
        return self.containerd.certs_dir

    def registry_log(self) -> str:
        return self.registry.log.read_text(errors="replace")


@pytest.fixture(scope="module")
def registry_node() -> Iterator[RegistryNode]:
    # Not tmp_path: pytest prunes old basetemps, and the pid records must outlive a session
    # that crashes so the processes can still be found and stopped.
    state = default_state_dir(os.environ).parent / f"test-registry-{os.getpid()}"
    env = {
        **os.environ,
        "KV_CLUSTER_STATE_DIR": str(state),
        "KV_CLUSTER_PORT_BASE": PORT_BASE,
        "KV_CLUSTER_HOST_IP": HOST_IP,
        # A pod range of this test's own: the guard test puts a "pod" address from it on
        # a veth of its own.
        "KV_CLUSTER_POD_CIDR": POD_CIDR,
    }
    config = ClusterConfig.from_env(env)
    layout = StateLayout(config.state_dir)
    layout.create()
    config.save(layout.config)
    hostnet = HostNetwork.load(layout.hostnet)
    ctx = ClusterContext(
        config=config,
        layout=layout,
        credentials=ensure_credentials(config, layout),
        kubernetes_bin=Path("/nonexistent"),
        etcd_binary=Path("/nonexistent"),
    )
    registry = Registry(ctx)
    node = NodeSpec(0, "registry-test", "10.250.0.0/24", "kvregtest0", layout.root / "nodes" / "n0")
    containerd: Containerd | None = None
    try:
        hostnet.ensure_loopback_address(config.host_ip)
        registry.ensure()
        builder = Builder(find_workspace(), Layout.default(), Progress())
        built = builder.build(IMAGES)
        images = {image.name: image for image in built}
        # As `up` starts a node's containerd: it pushes the sandbox image first.
        containerd = NodeContainerd(ctx, node, images["pause"])
        containerd.ensure()
        builder.push_to(built, HttpRegistry(registry_endpoint(ctx)))
        yield RegistryNode(ctx, registry, containerd, images)
    finally:
        if containerd is not None:
            containerd.stop()
        registry.stop()
        hostnet.undo()
        shutil.rmtree(state, ignore_errors=True)
        shutil.rmtree(registry_storage(config), ignore_errors=True)


_CRI_PULL = "/runtime.v1.ImageService/PullImage"


def _ctr_env(node: RegistryNode) -> dict[str, str]:
    # The same guard the node's containerd runs with: anything but the registry goes to
    # a closed local port.
    host = node.ctx.config.host_ip
    proxy = {"HTTP_PROXY": NO_REGISTRY_PROXY, "HTTPS_PROXY": NO_REGISTRY_PROXY, "NO_PROXY": host}
    return {**os.environ, **proxy}


def _ctr(node: RegistryNode, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["ctr", "--address", str(node.socket), "-n", "k8s.io", *args],
        capture_output=True,
        text=True,
        env=_ctr_env(node),
        timeout=120,
    )


def _images(node: RegistryNode) -> set[str]:
    listed = _ctr(node, "images", "ls", "-q")
    assert listed.returncode == 0, listed.stderr
    return set(listed.stdout.split())


class _Raw(CodecBase):
    """Bytes in, bytes out: the two CRI messages are small enough to write by hand."""

    __content_subtype__ = "proto"

    def encode(self, message: object, message_type: object) -> bytes:
        assert isinstance(message, bytes)
        return message

    def decode(self, data: bytes, message_type: object) -> bytes:
        return data


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field."""
    out, size = bytearray([(number << 3) | 2]), len(payload)
    while True:
        low, size = size & 0x7F, size >> 7
        out.append(low | (0x80 if size else 0))
        if not size:
            return bytes(out) + payload


async def _cri_pull(socket: Path, image: str) -> bytes:
    """CRI PullImage(PullImageRequest{image: ImageSpec{image}}); the raw reply."""
    channel = Channel(path=str(socket), codec=_Raw())
    try:
        async with channel.request(
            _CRI_PULL, Cardinality.UNARY_UNARY, bytes, bytes, timeout=120
        ) as call:
            await call.send_message(_field(1, _field(1, image.encode())), end=True)
            reply = await call.recv_message()
            assert reply is not None
            return reply
    finally:
        channel.close()


def _requests_for(node: RegistryNode, repo: str) -> list[str]:
    """Registry access-log lines naming `repo`."""
    return [
        line
        for line in node.registry_log().splitlines()
        if f"/v2/{repo}/" in line and '" ' in line and "HTTP/" in line
    ]


def test_the_registry_serves_v2_with_a_cert_from_the_cluster_ca(
    registry_node: RegistryNode,
) -> None:
    status = registry_node.registry.status()
    assert status.running
    assert status.health.ok, status.health.detail
    endpoint = registry_node.registry.endpoint_file.read_text()
    assert (
        f"{registry_node.ctx.config.host_ip}:{registry_node.ctx.config.ports.registry}" in endpoint
    )


def test_ctr_pulls_a_pushed_image_from_the_local_registry(registry_node: RegistryNode) -> None:
    image = registry_node.images["guest-kernel-boot"]
    assert image.ref not in _images(registry_node)  # a fresh store: nothing side-loaded
    pulled = _ctr(
        registry_node, "images", "pull", "--hosts-dir", str(registry_node.hosts_dir), image.ref
    )
    assert pulled.returncode == 0, pulled.stderr
    assert image.ref in _images(registry_node)
    tag = image.ref.rsplit(":", 1)[1]
    assert any(
        f"manifests/{tag}" in line
        for line in _requests_for(registry_node, "kubevirt-py/guest-kernel-boot")
    )


def test_the_kubelets_cri_pull_resolves_short_and_upstream_names_locally(
    registry_node: RegistryNode,
) -> None:
    pause = registry_node.images["pause"]
    short = pause.ref.removeprefix("docker.io/")  # as a pod spec names it
    upstream = "registry:5000/kubevirt/alpine-ext-kernel-boot-demo:devel"
    for name in (short, upstream):
        reply = asyncio.run(_cri_pull(registry_node.socket, name))
        assert b"sha256:" in reply
    present = _images(registry_node)
    assert pause.ref in present
    assert upstream in present


def test_an_absent_name_fails_fast_and_asks_only_the_local_registry(
    registry_node: RegistryNode,
) -> None:
    absent = f"docker.io/kubevirt-py/absent-{secrets.token_hex(4)}:nope"
    repo = absent.removeprefix("docker.io/").rsplit(":", 1)[0]
    started = time.monotonic()
    pulled = _ctr(
        registry_node, "images", "pull", "--hosts-dir", str(registry_node.hosts_dir), absent
    )
    assert pulled.returncode != 0
    assert "not found" in pulled.stderr
    with pytest.raises(GRPCError, match="not found"):
        asyncio.run(_cri_pull(registry_node.socket, absent))
    assert time.monotonic() - started < 10
    # Each pull asked the registry twice (the host entry, then `server`: the fallback
    # containerd would otherwise send to registry-1.docker.io) and nothing else.
    assert len([line for line in _requests_for(registry_node, repo) if " 404 " in line]) == 4
    for text in (pulled.stderr, registry_node.containerd.log.read_text(errors="replace")):
        assert "registry-1.docker.io" not in text
        assert "proxyconnect" not in text


def test_kv_images_push_to_a_named_registry_finds_the_image_already_there(
    registry_node: RegistryNode, tmp_path: Path
) -> None:
    certs = tmp_path / "certs"
    certs.mkdir()
    shutil.copy(registry_node.ctx.credentials.ca.paths.cert, certs / "ca.crt")
    address = f"{registry_node.ctx.config.host_ip}:{registry_node.ctx.config.ports.registry}"
    pushed = subprocess.run(
        [
            sys.executable,
            "-m",
            "kv_images.cli",
            "push",
            "pause",
            "--registry",
            address,
            "--cert-dir",
            str(certs),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert pushed.returncode == 0, pushed.stderr
    tag = registry_node.images["pause"].ref.rsplit(":", 1)[1]
    assert f"{address}/kubevirt-py/pause:{tag}" in pushed.stdout
    assert "already there" in pushed.stdout
    untrusted = subprocess.run(
        [sys.executable, "-m", "kv_images.cli", "push", "pause", "--registry", address],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert untrusted.returncode == 1
    assert "CERTIFICATE_VERIFY_FAILED" in untrusted.stderr


def _connects(netns: str, host: str, port: int) -> str:
    """Connect from inside `netns` (a /proc/<pid>/ns/net path); "ok" or the error's name."""
    probe = (
        "import socket, sys\n"
        "try:\n"
        f"    socket.create_connection(({host!r}, {port}), timeout=3).close()\n"
        "    print('ok')\n"
        "except OSError as exc:\n"
        "    print(type(exc).__name__)\n"
    )
    out = subprocess.run(
        ["nsenter", f"--net={netns}", sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_a_pod_cannot_reach_the_registry_and_the_host_still_can(
    registry_node: RegistryNode,
) -> None:
    """Nothing in a pod may push over the images nodes run: the node's guard rejects it."""
    config = registry_node.ctx.config
    port = config.ports.registry
    # A "pod": a network namespace held by a sleeping child (no `ip netns add`, which
    # bind-mounts /run/netns), joined to the host by a veth like a CNI bridge port.
    holder = subprocess.Popen(["unshare", "--net", "sleep", "300"])
    netns = f"/proc/{holder.pid}/ns/net"
    host_end, pod_end = f"kvrg{os.getpid() % 100000}h", f"kvrg{os.getpid() % 100000}p"
    guard = registry_guard(registry_node.ctx.layout.root / "registry-guard.json", config)

    def ip(*args: str, inside: bool = False) -> None:
        argv = ["nsenter", f"--net={netns}", "ip", *args] if inside else ["ip", *args]
        subprocess.run(argv, check=True, capture_output=True, timeout=30)

    try:
        ip("link", "add", host_end, "type", "veth", "peer", "name", pod_end)
        ip("link", "set", pod_end, "netns", str(holder.pid))
        ip("addr", "add", "10.251.0.1/24", "dev", host_end)
        ip("link", "set", host_end, "up")
        ip("addr", "add", "10.251.0.2/24", "dev", pod_end, inside=True)
        ip("link", "set", pod_end, "up", inside=True)
        ip("route", "add", f"{config.host_ip}/32", "via", "10.251.0.1", inside=True)
        assert _connects(netns, config.host_ip, port) == "ok"  # reachable without the guard
        guard.ensure()
        assert _connects(netns, config.host_ip, port) == "ConnectionRefusedError"
        assert registry_node.registry.health().ok  # the host still reaches it
    finally:
        guard.remove()
        subprocess.run(["ip", "link", "del", host_end], capture_output=True, check=False)
        holder.kill()
        holder.wait()
