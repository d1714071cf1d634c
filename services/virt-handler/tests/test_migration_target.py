"""The target handler prepares the target pod, listens, reports, and takes the VMI over."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import grpclib
import pytest
from grpclib.const import Status
from kube_runtime import EventRecorder, KubeClient, RawObject, SharedInformer, WorkQueue, thaw
from kube_runtime.fakes import FakeListWatch
from virt_handler import migration_target
from virt_handler.migration_proxy import MigrationProxies, MigrationTLS
from virt_handler.migration_target import MigrationTarget, TargetSettings
from virt_handler.network import SetupResult
from virt_handler.podfiles import PodFiles, PodUid
from virt_handler.vmi_sync import converter_options
from virt_rpc import DomainReason, DomainState, MigrationMetadata

if TYPE_CHECKING:
    from conftest import Node

MIGRATION_UID = "9d3c1e2f-4a5b-4c6d-8e7f-0a1b2c3d4e5f"
SOURCE = "node-0"
START = dt.datetime(2026, 1, 1, 0, 1, tzinfo=dt.UTC)
END = START + dt.timedelta(seconds=20)


@dataclass
class Target:
    node: Node
    loop: MigrationTarget
    vmis: SharedInformer[RawObject]
    proxies: MigrationProxies

    def put_vmi(self, body: dict[str, Any]) -> None:
        self.vmis.store.upsert(body)

    def patches(self) -> list[dict[str, Any]]:
        return [body for plural, _, body in self.node.client.patches if plural.startswith("virt")]

    def applied(self) -> dict[str, Any]:
        """The VMI after the target's merge patches (labels and status, one level deep)."""
        raw = self.vmis.get_raw(self.node.key)
        assert raw is not None
        body = cast(dict[str, Any], thaw(raw))
        for patch in self.patches():
            for key in ("metadata", "status"):
                for field, value in patch.get(key, {}).items():
                    if isinstance(value, dict) and isinstance(body[key].get(field), dict):
                        merged = {**body[key][field], **value}
                        body[key][field] = {k: v for k, v in merged.items() if v is not None}
                    else:
                        body[key][field] = value
        return body


def _incoming(node: Node, **state: Any) -> dict[str, Any]:
    """The VMI as virt-controller hands it to this node's handler."""
    vmi = node.vmi_body("Running")
    vmi["metadata"]["labels"] = {
        "kubevirt.io/nodeName": SOURCE,
        "kubevirt.io/migrationTargetNodeName": node.name,
    }
    vmi["status"].update(
        nodeName=SOURCE,
        migrationMethod="BlockMigration",
        migrationState={
            "migrationUid": MIGRATION_UID,
            "sourceNode": SOURCE,
            "targetNode": node.name,
            "sourcePod": "virt-launcher-vm-zzzzz",
            "targetPod": "virt-launcher-vm-abcde",
            **state,
        },
    )
    return vmi


@pytest.fixture
async def target(node: Node, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Target]:
    async def setup_pod_network(pod: PodUid, vmi: object, *_: object) -> SetupResult:
        node.network_setups.append(pod)
        return SetupResult()

    monkeypatch.setattr(migration_target, "setup_pod_network", setup_pod_network)
    vmis: SharedInformer[RawObject] = SharedInformer(FakeListWatch(), name="target-vmis")
    proxies = MigrationProxies(MigrationTLS(), tls_disabled=lambda: True)
    kube = cast(KubeClient, node.client)
    loop = MigrationTarget(
        kube,
        vmis,
        node.pods,
        WorkQueue("virt-handler-target", clock=node.clock),
        PodFiles(node.pods_dir),
        EventRecorder(kube, "virt-handler", host=node.name, clock=node.clock),
        TargetSettings(node=node.name, address="127.0.0.1"),
        proxies,
        lambda: converter_options(False),
        node.clock,
    )
    node.put_pod(node.pod_body("Running"))
    await node.start_launcher()
    yield Target(node, loop, vmis, proxies)
    await loop.close()
    await proxies.close()


def _volume(node: Node, name: str) -> Path:
    path = node.pods_dir / node.pod_uid / "volumes" / "kubernetes.io~empty-dir" / name
    path.mkdir(parents=True, exist_ok=True)
    return path


async def _serve_echo(directory: Path, name: str) -> asyncio.Server:
    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"libvirt:" + await reader.read(100))
        await writer.drain()
        writer.close()

    fd = os.open(directory, os.O_PATH | os.O_DIRECTORY)
    try:
        return await asyncio.start_unix_server(echo, f"/proc/self/fd/{fd}/{name}")
    finally:
        os.close(fd)


def _reasons(node: Node) -> list[str]:
    return node.client.reasons()


async def test_the_target_pod_is_prepared_and_its_listeners_published(target: Target) -> None:
    node = target.node
    target.put_vmi(_incoming(node))
    libvirt = await _serve_echo(_volume(node, "libvirt-runtime"), "libvirt-sock")

    await target.loop.reconcile(node.key)

    assert node.network_setups == [node.pod_uid]  # phase 1 before the launcher converts
    assert node.launcher.calls[-1] == "PrepareMigrationTarget"
    (prepare,) = node.launcher.syncs
    assert prepare.vmi is not None
    assert prepare.vmi.uid == node.vmi_uid
    (patch,) = target.patches()
    state = patch["status"]["migrationState"]
    assert state["targetNodeAddress"] == "127.0.0.1"
    ports = state["targetDirectMigrationNodePorts"]
    assert sorted(ports.values()) == [0, 49152, 49153]  # block migration: the disk stream too
    assert _reasons(node).count("PreparingTarget") == 2  # prepared; listening at ...

    # Port 0 of the published map reaches the target launcher's libvirt socket.
    tcp = next(int(p) for p, stream in ports.items() if stream == 0)
    reader, writer = await asyncio.open_connection("127.0.0.1", tcp)
    writer.write(b"hello")
    assert await reader.read() == b"\x01libvirt:hello"  # the proxy's go-ahead first
    writer.close()
    libvirt.close()

    target.put_vmi(target.applied())
    await target.loop.reconcile(node.key)
    assert len(target.patches()) == 1  # nothing new to say
    assert node.launcher.calls.count("PrepareMigrationTarget") == 1


async def test_a_migration_stream_reaches_the_socket_qemu_binds_later(target: Target) -> None:
    node = target.node
    target.put_vmi(_incoming(node))
    await target.loop.reconcile(node.key)
    ports = target.patches()[0]["status"]["migrationState"]["targetDirectMigrationNodePorts"]
    tcp = next(int(p) for p, stream in ports.items() if stream == 49152)
    # QEMU binds its incoming socket once libvirt prepared the domain, after the listener.
    qemu = await _serve_echo(
        _volume(node, "public/migrationproxy"), f"{MIGRATION_UID}-49152-source.sock"
    )
    reader, writer = await asyncio.open_connection("127.0.0.1", tcp)
    writer.write(b"pages")
    assert await reader.read() == b"\x01libvirt:pages"  # the proxy's go-ahead first
    writer.close()
    qemu.close()


async def test_the_domain_seen_then_running_then_the_vmi_taken_over(target: Target) -> None:
    node = target.node
    target.put_vmi(_incoming(node))
    await target.loop.reconcile(node.key)
    target.put_vmi(target.applied())

    await node.notify(DomainState.PAUSED, DomainReason.MIGRATED)
    await target.loop.reconcile(node.key)
    state = target.patches()[-1]["status"]["migrationState"]
    assert state == {"targetNodeDomainDetected": True}
    target.put_vmi(target.applied())

    await node.notify(
        DomainState.RUNNING,
        DomainReason.MIGRATED,
        migration=MigrationMetadata(uid=MIGRATION_UID, start_timestamp=START),
    )
    await target.loop.reconcile(node.key)
    state = target.patches()[-1]["status"]["migrationState"]
    assert state == {"targetNodeDomainReadyTimestamp": "2026-01-01T00:00:00Z"}
    target.put_vmi(target.applied())
    assert "FinalizeMigration" not in node.launcher.calls

    await node.notify(
        DomainState.RUNNING,
        DomainReason.MIGRATED,
        migration=MigrationMetadata(uid=MIGRATION_UID, start_timestamp=START, end_timestamp=END),
    )
    await target.loop.reconcile(node.key)
    assert node.launcher.calls[-1] == "FinalizeMigration"
    ack = target.patches()[-1]
    assert ack["metadata"]["labels"] == {
        "kubevirt.io/nodeName": node.name,
        "kubevirt.io/migrationTargetNodeName": None,
    }
    assert ack["status"]["nodeName"] == node.name
    assert ack["status"]["migrationTransport"] == "Unix"
    assert ack["status"]["migrationState"] == {
        "endTimestamp": "2026-01-01T00:01:20Z",
        "startTimestamp": "2026-01-01T00:01:00Z",
        "completed": True,
    }
    migrated = [e for e in node.client.events if e["reason"] == "Migrated"]
    assert [e["message"] for e in migrated] == [
        f"The VirtualMachineInstance migrated to node {node.name}."
    ]
    assert target.proxies.targets == {}  # the listeners are gone
    assert target.loop.records == {}


async def test_a_target_launcher_refusing_the_vmi_backs_off_with_one_event(
    target: Target,
) -> None:
    node = target.node
    node.launcher.sync_error = grpclib.GRPCError(Status.INVALID_ARGUMENT, "no such disk")
    target.put_vmi(_incoming(node))
    first = await target.loop.reconcile(node.key)
    second = await target.loop.reconcile(node.key)
    assert node.launcher.calls.count("PrepareMigrationTarget") == 1  # backing off
    assert first is not None
    assert second is not None
    assert _reasons(node) == ["SyncFailed"]
    assert target.patches() == []  # nothing published before the pod is ready
    await node.clock.advance(1.0)
    await target.loop.reconcile(node.key)
    assert node.launcher.calls.count("PrepareMigrationTarget") == 2


async def test_a_failed_migration_releases_the_target(target: Target) -> None:
    node = target.node
    target.put_vmi(_incoming(node))
    await target.loop.reconcile(node.key)
    assert target.proxies.targets
    failed = target.applied()
    failed["status"]["migrationState"].update(failed=True, completed=True, endTimestamp="x")
    target.put_vmi(failed)
    await target.loop.reconcile(node.key)
    assert target.proxies.targets == {}
    assert target.patches()[-1] == {
        "metadata": {"labels": {"kubevirt.io/migrationTargetNodeName": None}}
    }


async def test_a_vmi_for_another_target_is_left_alone(target: Target) -> None:
    node = target.node
    vmi = _incoming(node, targetNode="node-9")
    target.put_vmi(vmi)
    assert await target.loop.reconcile(node.key) is None
    assert node.launcher.calls == []


async def test_a_restarted_target_handler_listens_again_without_preparing_again(
    target: Target,
) -> None:
    node = target.node
    # What an earlier run of this handler published before it restarted.
    target.put_vmi(
        _incoming(
            node,
            targetNodeAddress="127.0.0.1",
            targetDirectMigrationNodePorts={"1": 0, "2": 49152, "3": 49153},
            startTimestamp="2026-01-01T00:01:00Z",
        )
    )
    await target.loop.reconcile(node.key)
    assert "PrepareMigrationTarget" not in node.launcher.calls
    assert node.launcher.calls == ["GetDomain"]
    (patch,) = target.patches()
    ports = patch["status"]["migrationState"]["targetDirectMigrationNodePorts"]
    assert sorted(ports.values()) == [0, 49152, 49153]
    assert set(ports) != {"1", "2", "3"}  # the new listeners, published for the source
