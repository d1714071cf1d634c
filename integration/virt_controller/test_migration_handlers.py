"""Two real virt-handler processes migrate a VMI between stand-in launchers over mutual TLS.

virt-handler is a controller too; here its two migration loops run as `kv-cluster` runs
them (`python -m virt_handler`, one per node, certificates with both key usages from one
CA) against this tier's real control plane, on two fake nodes of their own. No kubelet or
libvirt: each "launcher pod" is a Pod object bound to its node, with its emptyDirs in the
handler's kubelet root, where the test serves a stand-in `Cmd` service (and, in the target
pod, libvirtd's and QEMU's sockets as echo servers). The test plays virt-controller's
hand-off (migrationState and the target label, as upstream's handleTargetPodHandoff) and
the launchers' Notify events; everything between is the handlers': the source and target
proxies spliced over TLS, PrepareMigrationTarget, Migrate, the published ports, the
take-over patch and the deletion of the migrated source domain.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import os
import secrets
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from grpclib.client import Channel
from grpclib.server import Server
from kube_runtime import EVENTS, NODES, PODS, VIRTUAL_MACHINE_INSTANCES, ApiError, KubeClient
from kubevirt_api.resources import VIRTUAL_MACHINE_INSTANCE_MIGRATIONS as MIGRATIONS
from kv_cluster.pki import CertificateAuthority
from virt_handler import DEFAULT_DEVICES
from virt_handler.deviceplugin_api.pluginregistration import (
    RegistrationStatus,
    RegistrationStub,
)
from virt_rpc import (
    CmdBase,
    Domain,
    DomainEvent,
    DomainEventType,
    DomainReason,
    DomainResponse,
    DomainState,
    GetDomainRequest,
    GetGuestInfoRequest,
    GetGuestInfoResponse,
    HandshakeService,
    MigrateRequest,
    MigrationMetadata,
    NotifyStub,
    PingRequest,
    PingResponse,
    SyncVirtualMachineRequest,
    VmiRef,
    VmiRequest,
    serve_unix,
)

EMPTY_DIR = "volumes/kubernetes.io~empty-dir"
# Importing the handler on a loaded 2-core machine takes a while.
STARTUP = 180.0


class StandInLauncher(CmdBase):
    """A launcher's Cmd service that records calls and reports a settable domain."""

    def __init__(self, state: DomainState = DomainState.UNSPECIFIED) -> None:
        self.state = state
        self.reason = DomainReason.BOOTED
        self.calls: list[str] = []
        self.migrations: list[MigrateRequest] = []

    def _reply(self) -> DomainResponse:
        if self.state is DomainState.UNSPECIFIED:
            return DomainResponse()
        return DomainResponse(domain=Domain(name="vm", state=self.state, reason=self.reason))

    async def ping(self, message: PingRequest) -> PingResponse:
        return PingResponse()

    async def get_domain(self, message: GetDomainRequest) -> DomainResponse:
        self.calls.append("GetDomain")
        return self._reply()

    async def get_guest_info(self, message: GetGuestInfoRequest) -> GetGuestInfoResponse:
        return GetGuestInfoResponse()

    async def sync_virtual_machine(self, message: SyncVirtualMachineRequest) -> DomainResponse:
        self.calls.append("SyncVirtualMachine")
        self.state, self.reason = DomainState.RUNNING, DomainReason.BOOTED
        return self._reply()

    async def prepare_migration_target(self, message: SyncVirtualMachineRequest) -> DomainResponse:
        self.calls.append("PrepareMigrationTarget")
        return DomainResponse()

    async def migrate(self, message: MigrateRequest) -> DomainResponse:
        self.calls.append("Migrate")
        self.migrations.append(message)
        return self._reply()

    async def finalize_migration(self, message: VmiRequest) -> DomainResponse:
        self.calls.append("FinalizeMigration")
        return self._reply()

    async def delete(self, message: VmiRequest) -> DomainResponse:
        self.calls.append("Delete")
        return DomainResponse()


def _short(path: Path) -> tuple[int, str]:
    """A /proc/self/fd path to `path` (tmp paths exceed a unix socket address)."""
    fd = os.open(path.parent, os.O_PATH | os.O_DIRECTORY)
    return fd, f"/proc/self/fd/{fd}/{path.name}"


async def _echo(path: Path, tag: bytes) -> asyncio.Server:
    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(tag)
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        writer.close()

    fd, short = _short(path)
    try:
        return await asyncio.start_unix_server(echo, short)
    finally:
        os.close(fd)


async def _exchange(path: Path, payload: bytes, tag: bytes) -> bytes:
    fd, short = _short(path)
    try:
        reader, writer = await asyncio.open_unix_connection(short)
    finally:
        os.close(fd)
    writer.write(payload)
    await writer.drain()
    assert await reader.readexactly(len(tag)) == tag
    data = await reader.readexactly(len(payload))
    writer.close()
    return data


@dataclass
class HandlerNode:
    """One fake node: its virt-handler process, kubelet root and launcher pod."""

    name: str
    root: Path
    launcher: StandInLauncher
    pod_uid: str = ""
    process: subprocess.Popen[bytes] | None = None
    servers: list[Server | asyncio.Server] = field(default_factory=list)
    sequence: int = 0

    def volume(self, name: str) -> Path:
        return self.root / "pods" / self.pod_uid / EMPTY_DIR / name

    def log(self) -> str:
        path = self.root.parent / f"{self.name}.log"
        return path.read_text(errors="replace")[-6000:] if path.exists() else ""

    async def notify(
        self, vmi: VmiRef, state: DomainState, reason: DomainReason, **kw: Any
    ) -> None:
        """A Notify event from this pod's launcher, to its handler's socket."""
        self.sequence += 1
        fd, short = _short(self.volume("sockets") / "domain-notify-pipe.sock")
        channel = Channel(path=short)
        try:
            await NotifyStub(channel, timeout=10).handle_domain_event(
                DomainEvent(
                    vmi=vmi,
                    type=DomainEventType.MODIFIED,
                    domain=Domain(name="vm", state=state, reason=reason, **kw),
                    sequence=self.sequence,
                )
            )
        finally:
            channel.close()
            os.close(fd)


async def _serve_pod(node: HandlerNode, pod_uid: str) -> None:
    """The launcher pod's emptyDirs on its node, and its stand-in Cmd on launcher-sock."""
    node.pod_uid = pod_uid
    for volume in ("sockets", "public", "libvirt-runtime"):
        node.volume(volume).mkdir(parents=True, exist_ok=True)
    fd, short = _short(node.volume("sockets") / "launcher-sock")
    try:
        node.servers.append(
            await serve_unix([node.launcher, HandshakeService("virt-launcher", "test")], short)
        )
    finally:
        os.close(fd)


async def _stop(pair: tuple[HandlerNode, ...]) -> None:
    for node in pair:
        if node.process is not None and node.process.poll() is None:
            node.process.terminate()
            try:
                node.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                node.process.kill()
        for server in node.servers:
            server.close()
        print(f"--- virt-handler on {node.name}:\n{node.log()}")


async def _kubelet_registers(node: HandlerNode, within: float = STARTUP) -> None:
    """The kubelet's plugin watcher: every device plugin socket the handler serves in
    `plugins_registry` is told it is registered (the handler is schedulable only then)."""
    registry = node.root / "plugins_registry"
    # Every plugin's socket: the handler serves them one after the other, and one told
    # nothing leaves its resource off the node (a pod asking for it is never bound).
    expected = {kind.endpoint for kind in DEFAULT_DEVICES}
    deadline = asyncio.get_running_loop().time() + within
    while asyncio.get_running_loop().time() < deadline:
        sockets = sorted(registry.glob("*.sock")) if registry.is_dir() else []
        if expected <= {path.name for path in sockets}:
            for path in sockets:
                fd, short = _short(path)
                channel = Channel(path=short)
                try:
                    await RegistrationStub(channel, timeout=10).notify_registration_status(
                        RegistrationStatus(plugin_registered=True)
                    )
                finally:
                    channel.close()
                    os.close(fd)
            return
        await asyncio.sleep(0.5)
    raise AssertionError(
        f"virt-handler on {node.name} did not serve all of {sorted(expected)}\n{node.log()}"
    )


async def _launchers_report_the_move(
    source: HandlerNode, target: HandlerNode, ref: VmiRef, migration_uid: str
) -> None:
    """The source launcher's job started; the target's domain landed and runs."""
    start = dt.datetime.now(dt.UTC)
    await source.notify(
        ref,
        DomainState.RUNNING,
        DomainReason.BOOTED,
        migration=MigrationMetadata(uid=migration_uid, start_timestamp=start),
    )
    await target.notify(
        ref,
        DomainState.RUNNING,
        DomainReason.MIGRATED,
        migration=MigrationMetadata(
            uid=migration_uid, start_timestamp=start, end_timestamp=dt.datetime.now(dt.UTC)
        ),
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_handler(node: HandlerNode, kubeconfig: Path, pki: Path) -> subprocess.Popen[bytes]:
    (node.root / "pods").mkdir(parents=True, exist_ok=True)
    (node.root.parent / f"{node.name}-run").mkdir(exist_ok=True)
    relay = _free_port()
    with (node.root.parent / f"{node.name}.log").open("wb") as log:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "virt_handler",
                f"--node-name={node.name}",
                f"--kubeconfig={kubeconfig}",
                f"--kubelet-root={node.root}",
                f"--runtime-dir={node.root.parent / f'{node.name}-run'}",
                "--bind=127.0.0.1",
                f"--port={relay}",
                f"--metrics-port={_free_port()}",
                f"--tls-cert={pki / node.name}.crt",
                f"--tls-key={pki / node.name}.key",
                f"--client-ca={pki / 'ca.crt'}",
                "--pod-ip-address=127.0.0.1",
                "--heartbeat-interval=5",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )


@pytest.fixture
async def nodes(
    client: KubeClient, kv: Any, tmp_path: Path
) -> AsyncIterator[tuple[HandlerNode, HandlerNode]]:
    """Two fake nodes of this test only (cordoned: nothing else lands there)."""
    token = secrets.token_hex(3)
    pair = (
        HandlerNode(
            f"kvh-{token}-a", tmp_path / "a" / "kubelet", StandInLauncher(DomainState.RUNNING)
        ),
        HandlerNode(f"kvh-{token}-b", tmp_path / "b" / "kubelet", StandInLauncher()),
    )
    for node in pair:
        await kv.add_fake_node(client, node.name)
        await client.merge_patch(NODES, node.name, {"spec": {"unschedulable": True}})
    try:
        yield pair
    finally:
        await _stop(pair)
        for node in pair:
            with contextlib.suppress(ApiError):
                await client.delete(NODES, node.name)


@pytest.fixture
def pki(tmp_path: Path, nodes: tuple[HandlerNode, HandlerNode]) -> Path:
    directory = tmp_path / "pki"
    ca = CertificateAuthority.load_or_create(directory, "ca", "kvh-migration-test-ca")
    for node in nodes:
        ca.issue(directory, node.name, "virt-handler", server=True, client=True)
    return directory


async def _pod(client: KubeClient, namespace: str, name: str, node: str, vmi_uid: str) -> str:
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": {"kubevirt.io": "virt-launcher"},
            "ownerReferences": [
                {
                    "apiVersion": "kubevirt.io/v1",
                    "kind": "VirtualMachineInstance",
                    "name": "vm",
                    "uid": vmi_uid,
                    "controller": True,
                }
            ],
        },
        "spec": {
            "nodeName": node,
            "containers": [{"name": "compute", "image": f"launcher:{node}"}],
        },
    }
    created = await client.create(PODS, body, namespace)
    return str(created["metadata"]["uid"])


async def test_a_vmi_moves_between_two_real_handlers(
    client: KubeClient,
    namespace: str,
    kv: Any,
    controller_cluster: Any,
    nodes: tuple[HandlerNode, HandlerNode],
    pki: Path,
) -> None:
    source, target = nodes
    vmi = await client.create(
        VIRTUAL_MACHINE_INSTANCES,
        {
            "apiVersion": "kubevirt.io/v1",
            "kind": "VirtualMachineInstance",
            "metadata": {"name": "vm"},
            "spec": {"domain": {"devices": {"autoattachPodInterface": False}}},
        },
        namespace,
    )
    uid = vmi["metadata"]["uid"]
    ref = VmiRef(namespace=namespace, name="vm", uid=uid)
    await _serve_pod(
        source, await _pod(client, namespace, "virt-launcher-vm-src", source.name, uid)
    )
    await _serve_pod(
        target, await _pod(client, namespace, "virt-launcher-vm-tgt", target.name, uid)
    )
    target.servers.append(
        await _echo(target.volume("libvirt-runtime") / "libvirt-sock", b"<libvirt>")
    )
    for node in nodes:
        node.process = _start_handler(node, controller_cluster.kubeconfig, pki)

    async def current() -> dict[str, Any]:
        return dict(await client.get(VIRTUAL_MACHINE_INSTANCES, "vm", namespace))

    # Running on the source, as its handler sees it.
    await client.merge_patch(
        VIRTUAL_MACHINE_INSTANCES,
        "vm",
        {
            "metadata": {"labels": {"kubevirt.io/nodeName": source.name}},
            "status": {"phase": "Running", "nodeName": source.name},
        },
        namespace,
    )

    async def migratable() -> Any:
        conditions = (await current())["status"].get("conditions") or []
        return any(c["type"] == "LiveMigratable" and c["status"] == "True" for c in conditions)

    await kv.eventually(migratable, within=STARTUP, what="the source handler's LiveMigratable")

    # virt-controller's hand-off.
    migration_uid = secrets.token_hex(4) + "-0000-4000-8000-" + secrets.token_hex(6)
    await client.merge_patch(
        VIRTUAL_MACHINE_INSTANCES,
        "vm",
        {
            "metadata": {"labels": {"kubevirt.io/migrationTargetNodeName": target.name}},
            "status": {
                "migrationState": {
                    "migrationUid": migration_uid,
                    "sourceNode": source.name,
                    "targetNode": target.name,
                    "sourcePod": "virt-launcher-vm-src",
                    "targetPod": "virt-launcher-vm-tgt",
                    "migrationConfiguration": {"bandwidthPerMigration": "64Mi"},
                }
            },
        },
        namespace,
    )

    async def published() -> Any:
        state = (await current())["status"].get("migrationState") or {}
        return state if state.get("targetDirectMigrationNodePorts") else None

    state = await kv.eventually(published, within=STARTUP, what="the target's ports")
    assert state["targetNodeAddress"] == "127.0.0.1"
    assert sorted(state["targetDirectMigrationNodePorts"].values()) == [0, 49152]
    assert "PrepareMigrationTarget" in target.launcher.calls

    async def migrating() -> Any:
        return source.launcher.migrations

    (request,) = await kv.eventually(migrating, within=60, what="Migrate on the source")
    assert request.options is not None
    assert request.options.migration_uid == migration_uid
    assert request.options.bandwidth_bytes_per_second == 64 << 20
    proxy = source.volume("public") / "migrationproxy"
    assert {os.stat(proxy / n).st_uid for n in os.listdir(proxy)} == {107}

    # libvirt's connection: source pod socket -> mutual TLS -> the target pod's libvirtd.
    got = await _exchange(proxy / f"{migration_uid}-source.sock", b"libvirt rpc", b"<libvirt>")
    assert got == b"libvirt rpc"
    # QEMU's stream, bound in the target pod once libvirt prepared it; multifd-style.
    qemu = target.volume("public") / "migrationproxy"
    qemu.mkdir(exist_ok=True)
    target.servers.append(await _echo(qemu / f"{migration_uid}-49152-source.sock", b"<qemu>"))
    pages = os.urandom(1 << 20)
    replies = await asyncio.gather(
        *(
            _exchange(proxy / f"{migration_uid}-49152-source.sock", pages, b"<qemu>")
            for _ in range(8)
        )
    )
    assert replies == [pages] * 8

    await _launchers_report_the_move(source, target, ref, migration_uid)

    async def taken_over() -> Any:
        found = await current()
        return found if found["status"].get("nodeName") == target.name else None

    moved = await kv.eventually(taken_over, within=60, what="the target's take-over")
    assert moved["metadata"]["labels"] == {"kubevirt.io/nodeName": target.name}
    state = moved["status"]["migrationState"]
    assert state["completed"] is True
    assert state["targetNodeDomainDetected"] is True
    for stamp in ("startTimestamp", "endTimestamp", "targetNodeDomainReadyTimestamp"):
        assert state.get(stamp), json.dumps(state)
    assert moved["status"]["migrationTransport"] == "Unix"
    assert "FinalizeMigration" in target.launcher.calls

    async def adopted() -> Any:
        status = (await current())["status"]
        return status.get("launcherContainerImageVersion") == f"launcher:{target.name}"

    await kv.eventually(adopted, within=60, what="the target node's sync loop adopting the VMI")

    # The source domain is deleted only once libvirt shut it off, never while it runs.
    assert "Delete" not in source.launcher.calls
    source.launcher.state, source.launcher.reason = DomainState.SHUTOFF, DomainReason.MIGRATED

    async def deleted() -> Any:
        return "Delete" in source.launcher.calls

    await kv.eventually(deleted, within=30, what="the migrated source domain deleted")
    assert os.listdir(proxy) == []  # the source proxy's sockets are gone
    final = await current()
    assert final["status"]["phase"] == "Running"
    events = await client.list(EVENTS, namespace, field_selector="involvedObject.name=vm")
    reasons = {(e["reason"], e["message"]) for e in events.get("items") or ()}
    assert ("Migrated", f"The VirtualMachineInstance migrated to node {target.name}.") in reasons
    assert ("Migrating", "VirtualMachineInstance is migrating.") in reasons


def _running_pod_status() -> dict[str, Any]:
    """What a kubelet reports once a launcher pod's compute container runs."""
    return {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "True"}],
        "containerStatuses": [
            {
                "name": "compute",
                "ready": True,
                "restartCount": 0,
                "image": "virt-launcher",
                "imageID": "",
                "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}},
            }
        ],
    }


async def test_a_migration_walks_to_succeeded_with_the_controller_and_both_handlers(
    client: KubeClient,
    namespace: str,
    kv: Any,
    controller: Any,
    controller_cluster: Any,
    tmp_path: Path,
) -> None:
    """virt-controller, two virt-handlers, stand-in kubelet and launchers: a VMIM goes
    Pending → … → Succeeded, and the VMI ends on the other node."""
    token = secrets.token_hex(3)
    pair = tuple(
        HandlerNode(f"kvh-{token}-{side}", tmp_path / side / "kubelet", StandInLauncher())
        for side in ("a", "b")
    )
    by_name = {node.name: node for node in pair}
    for node in pair:  # schedulable, but only for this test's VMI (its nodeSelector)
        await kv.add_fake_node(client, node.name)
        await client.merge_patch(NODES, node.name, {"metadata": {"labels": {"kvh-test": token}}})
    ca = CertificateAuthority.load_or_create(tmp_path / "pki", "ca", "kvh-migration-test-ca")
    for node in pair:
        ca.issue(tmp_path / "pki", node.name, "virt-handler", server=True, client=True)
        node.process = _start_handler(node, controller_cluster.kubeconfig, tmp_path / "pki")
    try:
        await asyncio.gather(*(_kubelet_registers(node) for node in pair))
        await client.create(
            VIRTUAL_MACHINE_INSTANCES,
            {
                "apiVersion": "kubevirt.io/v1",
                "kind": "VirtualMachineInstance",
                "metadata": {"name": "vm"},
                "spec": {
                    "nodeSelector": {"kvh-test": token},
                    "domain": {
                        "devices": {"autoattachPodInterface": False},
                        "resources": {"requests": {"memory": "64Mi"}},
                    },
                },
            },
            namespace,
        )

        async def bound_pod(job: str | None) -> Any:
            for pod in await kv.launcher_pods(client, namespace):
                labels = pod["metadata"].get("labels") or {}
                if labels.get("kubevirt.io/migrationJobUID") == job and pod["spec"].get("nodeName"):
                    return pod
            return None

        async def kubelet_starts(job: str | None) -> HandlerNode:
            try:
                pod = await kv.eventually(lambda: bound_pod(job), within=60, what="a bound pod")
            except AssertionError:
                pods = [
                    (
                        p["metadata"]["name"],
                        p["spec"].get("nodeSelector"),
                        p["spec"].get("affinity"),
                    )
                    for p in await kv.launcher_pods(client, namespace)
                ]
                migs = await client.list(MIGRATIONS, namespace)
                raise AssertionError(
                    f"no bound pod for {job}: pods {pods}; migrations "
                    f"{[m.get('status') for m in migs.get('items') or ()]}"
                ) from None
            node = by_name[pod["spec"]["nodeName"]]
            await _serve_pod(node, pod["metadata"]["uid"])
            await client.patch_status(
                PODS, pod["metadata"]["name"], _running_pod_status(), namespace
            )
            return node

        source = await kubelet_starts(None)

        async def running() -> Any:
            vmi = await client.get(VIRTUAL_MACHINE_INSTANCES, "vm", namespace)
            status = vmi.get("status") or {}
            migratable = any(
                c["type"] == "LiveMigratable" and c["status"] == "True"
                for c in status.get("conditions") or ()
            )
            return vmi if status.get("phase") == "Running" and migratable else None

        vmi = await kv.eventually(running, within=STARTUP, what="the VMI Running (source handler)")
        assert "SyncVirtualMachine" in source.launcher.calls
        assert vmi["status"]["nodeName"] == source.name
        ref = VmiRef(namespace=namespace, name="vm", uid=vmi["metadata"]["uid"])

        migration = await client.create(
            MIGRATIONS,
            {
                "apiVersion": "kubevirt.io/v1",
                "kind": "VirtualMachineInstanceMigration",
                "metadata": {
                    "name": "move",
                    "labels": {"kubevirt.io/vmi-name": "vm"},
                    "finalizers": ["kubevirt.io/migrationJobFinalize"],
                },
                "spec": {"vmiName": "vm"},
            },
            namespace,
        )
        migration_uid = migration["metadata"]["uid"]
        target = await kubelet_starts(migration_uid)
        assert target is not source
        target.servers.append(
            await _echo(target.volume("libvirt-runtime") / "libvirt-sock", b"<libvirt>")
        )

        async def migrate_called() -> Any:
            return source.launcher.migrations

        (request,) = await kv.eventually(migrate_called, within=120, what="Migrate on the source")
        assert request.options is not None
        assert request.options.migration_uid == migration_uid
        proxy = source.volume("public") / "migrationproxy"
        got = await _exchange(proxy / f"{migration_uid}-source.sock", b"hello", b"<libvirt>")
        assert got == b"hello"

        await _launchers_report_the_move(source, target, ref, migration_uid)

        async def succeeded() -> Any:
            found = await client.get(MIGRATIONS, "move", namespace)
            return found if (found.get("status") or {}).get("phase") == "Succeeded" else None

        done = await kv.eventually(succeeded, within=120, what="the migration Succeeded")
        phases = [p["phase"] for p in done["status"]["phaseTransitionTimestamps"]]
        assert phases[-4:] == ["PreparingTarget", "TargetReady", "Running", "Succeeded"], phases
        moved = await client.get(VIRTUAL_MACHINE_INSTANCES, "vm", namespace)
        assert moved["status"]["nodeName"] == target.name
        assert moved["status"]["phase"] == "Running"
        assert moved["metadata"]["labels"]["kubevirt.io/nodeName"] == target.name
        state = moved["status"]["migrationState"]
        assert (state["sourceNode"], state["targetNode"]) == (source.name, target.name)
        assert state["completed"] is True
        assert not state.get("failed")

        # The source handler let go of the VMI already; it still deletes its launcher's
        # domain once libvirt reports it off (never while it runs).
        assert "Delete" not in source.launcher.calls
        source.launcher.state, source.launcher.reason = DomainState.SHUTOFF, DomainReason.MIGRATED

        async def deleted() -> Any:
            return "Delete" in source.launcher.calls

        await kv.eventually(deleted, within=30, what="the migrated source domain deleted")
    finally:
        await _stop(pair)
        for node in pair:
            with contextlib.suppress(ApiError):
                await client.delete(NODES, node.name)
