"""The source handler migrates a handed-off VMI: proxy, Migrate, progress, abort, Migrated."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import pytest
from kubevirt_api import ClusterConfig
from virt_handler.migration_proxy import MigrationProxies, MigrationTLS
from virt_handler.migration_source import MigrationSource, migration_options
from virt_rpc import (
    DomainEventType,
    DomainReason,
    DomainState,
    MigrationAbortStatus,
    MigrationMetadata,
    MigrationMode,
)

if TYPE_CHECKING:
    from conftest import FakeLauncher, Node

CR_64MI = {"spec": {"configuration": {"migrations": {"bandwidthPerMigration": "64Mi"}}}}
MIGRATION_UID = "9d3c1e2f-4a5b-4c6d-8e7f-0a1b2c3d4e5f"
PORTS = {"40001": 0, "40002": 49152}
START = dt.datetime(2026, 1, 1, 0, 1, tzinfo=dt.UTC)


@pytest.fixture
async def source(node: Node) -> AsyncIterator[Node]:
    """A node whose sync loop migrates, with a running guest."""
    proxies = MigrationProxies(MigrationTLS(), tls_disabled=lambda: True)
    node.sync.migrations = MigrationSource(
        node.sync.client,
        node.sync.recorder,
        node.sync.files,
        proxies,
        node.name,
        node.clock,
        cluster=lambda: ClusterConfig.from_kubevirt(CR_64MI).migrations,
    )
    (node.pods_dir / node.pod_uid / "volumes" / "kubernetes.io~empty-dir" / "public").mkdir(
        parents=True
    )
    await node.guest_running()
    yield node
    await proxies.close()


def _hand_off(node: Node, **state: Any) -> dict[str, Any]:
    """The VMI as virt-controller and the target handler leave it before Migrate."""
    vmi = node.applied()
    vmi["status"]["migrationState"] = {
        "migrationUid": MIGRATION_UID,
        "sourceNode": node.name,
        "targetNode": "node-2",
        "sourcePod": "virt-launcher-vm-abcde",
        "targetPod": "virt-launcher-vm-fghij",
        "targetNodeAddress": "127.0.0.1",
        "targetDirectMigrationNodePorts": PORTS,
        **state,
    }
    node.put_vmi(vmi)
    return vmi


def _migration_patches(node: Node) -> list[dict[str, Any]]:
    return [p["migrationState"] for p in node.client.status_patches() if "migrationState" in p]


def _launcher(node: Node) -> FakeLauncher:
    return node.launcher


async def test_a_handed_off_vmi_gets_qemu_owned_proxy_sockets_then_one_migrate(
    source: Node,
) -> None:
    _hand_off(
        source,
        migrationConfiguration={
            "bandwidthPerMigration": "1Mi",
            "progressTimeout": 5,
            "completionTimeoutPerGiB": 7,
            "allowAutoConverge": True,
        },
    )
    await source.sync.reconcile(source.key)

    (request,) = _launcher(source).migrations
    options = request.options
    assert options is not None
    assert options.migration_uid == MIGRATION_UID
    assert options.bandwidth_bytes_per_second == 1024 * 1024
    assert (options.progress_timeout_seconds, options.completion_timeout_per_gib) == (5, 7)
    assert options.allow_auto_converge
    assert not options.allow_post_copy
    assert not options.allow_workload_disruption
    assert options.parallel_migration_threads == 8
    assert request.vmi is not None
    assert request.vmi.uid == source.vmi_uid
    proxy_dir = (
        source.pods_dir / source.pod_uid / "volumes/kubernetes.io~empty-dir/public/migrationproxy"
    )
    names = sorted(os.listdir(proxy_dir))
    assert names == [f"{MIGRATION_UID}-49152-source.sock", f"{MIGRATION_UID}-source.sock"]
    # libvirt and QEMU run as the qemu user: theirs to connect to.
    assert {os.stat(proxy_dir / n).st_uid for n in names} == {107}
    assert "Migrating" in source.client.reasons()

    await source.sync.reconcile(source.key)
    assert _launcher(source).calls.count("Migrate") == 1


async def test_without_published_ports_nothing_starts(source: Node) -> None:
    _hand_off(source, targetNodeAddress="", targetDirectMigrationNodePorts=None)
    result = await source.sync.reconcile(source.key)
    assert "Migrate" not in _launcher(source).calls
    assert result is not None
    assert result.requeue_after == 1.0


async def test_the_launchers_progress_lands_in_migration_state_once(source: Node) -> None:
    _hand_off(source)
    await source.sync.reconcile(source.key)
    await source.notify(
        DomainState.RUNNING,
        DomainReason.BOOTED,
        migration=MigrationMetadata(
            uid=MIGRATION_UID, start_timestamp=START, mode=MigrationMode.PRE_COPY
        ),
    )
    await source.sync.reconcile(source.key)
    assert _migration_patches(source) == [
        {"startTimestamp": "2026-01-01T00:01:00Z", "mode": "PreCopy"}
    ]
    source.put_vmi(source.applied())
    await source.sync.reconcile(source.key)
    assert len(_migration_patches(source)) == 1


async def test_abort_requested_cancels_once_and_the_abort_is_reported(source: Node) -> None:
    vmi = _hand_off(source)
    await source.sync.reconcile(source.key)
    vmi["status"]["migrationState"]["abortRequested"] = True
    source.put_vmi(vmi)
    await source.sync.reconcile(source.key)
    await source.sync.reconcile(source.key)
    assert _launcher(source).calls.count("CancelMigration") == 1
    assert "VirtualMachineInstance is aborting migration." in [
        e["message"] for e in source.client.events
    ]

    end = START + dt.timedelta(seconds=30)
    await source.notify(
        DomainState.RUNNING,
        DomainReason.BOOTED,
        migration=MigrationMetadata(
            uid=MIGRATION_UID,
            start_timestamp=START,
            end_timestamp=end,
            failed=True,
            failure_reason="Live migration has been aborted",
            abort_status=MigrationAbortStatus.SUCCEEDED,
        ),
    )
    await source.sync.reconcile(source.key)
    assert _migration_patches(source)[-1] == {
        "startTimestamp": "2026-01-01T00:01:00Z",
        "abortStatus": "Succeeded",
        "failed": True,
        "completed": True,
        "endTimestamp": "2026-01-01T00:01:30Z",
        "failureReason": "Live migration has been aborted",
    }
    assert "Migrated" in source.client.reasons()
    # The VMI stays Running here; once the migration is done the proxy goes.
    assert all(p.get("phase") in (None, "Running") for p in source.client.status_patches())
    source.put_vmi(source.applied())
    await source.sync.reconcile(source.key)
    assert source.sync.migrations is not None
    proxy_dir = (
        source.pods_dir / source.pod_uid / "volumes/kubernetes.io~empty-dir/public/migrationproxy"
    )
    assert os.listdir(proxy_dir) == []


async def test_an_abort_before_migrate_ends_the_migration_without_libvirt(source: Node) -> None:
    _hand_off(
        source, abortRequested=True, targetNodeAddress="", targetDirectMigrationNodePorts=None
    )
    await source.sync.reconcile(source.key)
    assert "Migrate" not in _launcher(source).calls
    (patch,) = _migration_patches(source)
    assert (patch["abortStatus"], patch["failed"], patch["completed"]) == ("Succeeded", True, True)


async def test_a_domain_that_migrated_away_is_deleted_and_not_the_vmis_end(source: Node) -> None:
    _hand_off(source)
    await source.sync.reconcile(source.key)
    before = len(source.client.status_patches())
    await source.notify(DomainState.SHUTOFF, DomainReason.MIGRATED)
    await source.sync.reconcile(source.key)
    assert _launcher(source).calls[-1] == "Delete"
    # The launcher ends with its domain; its pod finishing does not fail the VMI either.
    pod = source.pod_body("Succeeded")
    source.put_pod(pod)
    vmi = source.applied()
    vmi["status"]["migrationState"]["targetNodeDomainReadyTimestamp"] = "2026-01-01T00:02:00Z"
    source.put_vmi(vmi)
    result = await source.sync.reconcile(source.key)
    await source.clock.advance(120)
    await source.sync.reconcile(source.key)
    assert source.client.status_patches()[before:] == []
    assert result is None
    assert _launcher(source).calls.count("Delete") == 1


async def test_a_target_that_never_reports_the_domain_fails_the_vmi_after_60_s(
    source: Node,
) -> None:
    _hand_off(source)
    await source.sync.reconcile(source.key)
    await source.notify(DomainState.SHUTOFF, DomainReason.MIGRATED)
    result = await source.sync.reconcile(source.key)
    assert result is not None
    assert result.requeue_after is not None
    assert result.requeue_after <= 60.0
    # Deleted, as it should be: the grace still runs without the domain.
    await source.notify(DomainState.SHUTOFF, DomainReason.MIGRATED, DomainEventType.DELETED)
    await source.sync.reconcile(source.key)
    await source.clock.advance(59)
    await source.sync.reconcile(source.key)
    assert not any(p.get("phase") == "Failed" for p in source.client.status_patches())
    await source.clock.advance(2)
    await source.sync.reconcile(source.key)
    failed = source.client.status_patches()[-1]
    assert failed["phase"] == "Failed"
    assert failed["migrationState"]["failed"] is True
    assert "never observed on the target" in source.client.events[-1]["message"]


def test_options_default_to_the_cluster_then_upstream() -> None:
    vmi = {"spec": {"domain": {"resources": {"limits": {"cpu": "2"}}}}, "status": {}}
    cluster = ClusterConfig.from_kubevirt(
        {"spec": {"configuration": {"migrations": {"allowPostCopy": True}}}}
    ).migrations
    options = migration_options(vmi, cluster)
    assert options.bandwidth_bytes_per_second == 0  # 0Mi: unlimited
    assert (options.progress_timeout_seconds, options.completion_timeout_per_gib) == (150, 150)
    # allowWorkloadDisruption follows allowPostCopy; a CPU limit turns multifd off.
    assert options.allow_post_copy
    assert options.allow_workload_disruption
    assert options.parallel_migration_threads == 0
    block = migration_options({"status": {"migrationMethod": "BlockMigration"}})
    assert block.block_migration
    assert block.parallel_migration_threads == 8
    assert not block.allow_workload_disruption  # upstream's stock cluster
    # A resolved configuration without allowWorkloadDisruption: its own allowPostCopy.
    resolved = {"status": {"migrationState": {"migrationConfiguration": {"allowPostCopy": True}}}}
    assert migration_options(resolved).allow_workload_disruption


def test_the_clusters_migrations_apply_without_a_resolved_configuration(
    source: Node,
) -> None:
    options = migration_options(_hand_off(source), ClusterConfig.from_kubevirt(CR_64MI).migrations)
    assert options.bandwidth_bytes_per_second == 64 << 20


async def test_a_vmi_taken_over_before_our_domain_stopped_gets_it_deleted_once_off(
    source: Node,
) -> None:
    _hand_off(source)
    await source.sync.reconcile(source.key)
    # The target acknowledged first: the VMI left this node's informer.
    raw = source.vmis.get_raw(source.key)
    assert raw is not None
    source.vmis.store.delete(raw)
    await source.sync.reconcile(source.key)
    migrations = source.sync.migrations
    assert isinstance(migrations, MigrationSource)
    (cleanup,) = migrations.pending
    await source.clock.advance(1.0)
    assert "Delete" not in _launcher(source).calls  # still running: never killed
    source.launcher.state, source.launcher.reason = DomainState.SHUTOFF, DomainReason.MIGRATED
    await source.clock.advance(1.0)
    await cleanup
    assert _launcher(source).calls[-1] == "Delete"
