"""Guest metrics carry KubeVirt's names and labels, and only for launchers that answer."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest
from service_kit import MetricsRegistry
from virt_handler.metrics import GuestMetrics
from virt_rpc import (
    BlockStats,
    DomainState,
    DomainStats,
    GuestFilesystem,
    GuestInfo,
    MemoryStats,
    MigrationJobStats,
    NetworkStats,
    VcpuStats,
)

if TYPE_CHECKING:
    from conftest import Node

STATS = DomainStats(
    cpu_time_ns=3_000_000_000,
    cpu_user_ns=2_000_000_000,
    cpu_system_ns=1_000_000_000,
    vcpus=[VcpuStats(id=0, state=DomainState.RUNNING, time_ns=1_500_000_000, wait_ns=500_000_000)],
    memory=MemoryStats(rss_kib=2048, available_kib=1024, major_faults=3),
    block=[BlockStats(name="rootdisk", device="vda", read_bytes=4096, read_time_ns=2_000_000_000)],
    network=[NetworkStats(name="default", device="tap0", rx_bytes=100, tx_packets=2)],
)
FILESYSTEM = GuestFilesystem(
    disk_name="vda1", mount_point="/", type="ext4", used_bytes=1000, total_bytes=4000
)
VMI = 'name="vm",namespace="ns",node="node-1"'


async def _running(node: Node) -> None:
    node.launcher.stats = STATS
    await node.guest_running()


def _scrape(registry: MetricsRegistry) -> set[str]:
    body, _ = registry.render()
    return {line for line in body.decode().splitlines() if line and not line.startswith("#")}


def _sample(name: str, labels: str, value: float) -> str:
    return f"{name}{{{labels}}} {value}"


@pytest.fixture
def registry() -> MetricsRegistry:
    return MetricsRegistry()


async def test_a_running_guests_stats_are_exported_with_kubevirts_names(
    node: Node, registry: MetricsRegistry
) -> None:
    await _running(node)
    metrics = GuestMetrics(registry, node.sync, ready=lambda: True, clock=node.clock)

    await metrics.collect()

    scraped = _scrape(registry)
    drive = 'drive="rootdisk",' + VMI
    nic = 'interface="default",' + VMI
    for sample in (
        _sample("kubevirt_vmi_cpu_usage_seconds_total", VMI, 3.0),
        _sample("kubevirt_vmi_cpu_user_usage_seconds_total", VMI, 2.0),
        _sample("kubevirt_vmi_cpu_system_usage_seconds_total", VMI, 1.0),
        _sample("kubevirt_vmi_memory_resident_bytes", VMI, 2097152.0),
        _sample("kubevirt_vmi_memory_available_bytes", VMI, 1048576.0),
        _sample("kubevirt_vmi_memory_pgmajfault_total", VMI, 3.0),
        _sample("kubevirt_vmi_vcpu_seconds_total", 'id="0",' + VMI + ',state="running"', 1.5),
        _sample("kubevirt_vmi_vcpu_wait_seconds_total", 'id="0",' + VMI, 0.5),
        _sample("kubevirt_vmi_storage_read_traffic_bytes_total", drive, 4096.0),
        _sample("kubevirt_vmi_storage_read_times_seconds_total", drive, 2.0),
        _sample("kubevirt_vmi_network_receive_bytes_total", nic, 100.0),
        _sample("kubevirt_vmi_network_transmit_packets_total", nic, 2.0),
    ):
        assert sample in scraped, sample
    assert "kubevirt_virt_handler_ready_status 1.0" in scraped


def _types(registry: MetricsRegistry) -> dict[str, str]:
    body, _ = registry.render()
    lines = [line.split() for line in body.decode().splitlines() if line.startswith("# TYPE")]
    return {parts[2]: parts[3] for parts in lines}


async def test_cumulative_series_are_counters_and_levels_are_gauges(
    node: Node, registry: MetricsRegistry
) -> None:
    await _running(node)
    await GuestMetrics(registry, node.sync, ready=lambda: True, clock=node.clock).collect()

    types = _types(registry)
    assert types["kubevirt_vmi_cpu_usage_seconds_total"] == "counter"
    assert types["kubevirt_vmi_network_receive_bytes_total"] == "counter"
    assert types["kubevirt_vmi_vcpu_seconds_total"] == "counter"
    assert types["kubevirt_vmi_memory_pgmajfault_total"] == "counter"
    assert types["kubevirt_vmi_memory_available_bytes"] == "gauge"
    assert types["kubevirt_vmi_memory_swap_in_traffic_bytes"] == "gauge"


def test_an_outgoing_migrations_progress_is_exported_while_it_runs(
    registry: MetricsRegistry,
) -> None:
    metrics = GuestMetrics(registry, sync=None, ready=lambda: True)  # type: ignore[arg-type]
    job = MigrationJobStats(
        data_total_bytes=1000,
        data_processed_bytes=600,
        data_remaining_bytes=400,
        memory_dirty_rate_bytes_per_second=50,
        memory_transfer_rate_bytes_per_second=300,
    )
    migrating = DomainStats(cpu_time_ns=1, migration_job=job)
    metrics.record("uid", "node-1", "ns", "vm", migrating)

    scraped = _scrape(registry)
    assert _sample("kubevirt_vmi_migration_data_bytes_total", VMI, 1000.0) in scraped
    assert _sample("kubevirt_vmi_migration_data_remaining_bytes", VMI, 400.0) in scraped
    assert _sample("kubevirt_vmi_migration_memory_transfer_rate_bytes", VMI, 300.0) in scraped
    assert _types(registry)["kubevirt_vmi_migration_data_bytes_total"] == "counter"

    metrics.record("uid", "node-1", "ns", "vm", DomainStats(cpu_time_ns=2))
    assert not any(s.startswith("kubevirt_vmi_migration_") for s in _scrape(registry))


def test_the_guest_agents_filesystems_are_exported_while_it_is_connected(
    registry: MetricsRegistry,
) -> None:
    metrics = GuestMetrics(registry, sync=None, ready=lambda: True)  # type: ignore[arg-type]
    agent = GuestInfo(agent_connected=True, filesystems=[FILESYSTEM])
    metrics.record("uid", "node-1", "ns", "vm", STATS, agent)

    fs = 'disk_name="vda1",file_system_type="ext4",mount_point="/",' + VMI
    assert _sample("kubevirt_vmi_filesystem_capacity_bytes", fs, 4000.0) in _scrape(registry)
    assert _sample("kubevirt_vmi_filesystem_used_bytes", fs, 1000.0) in _scrape(registry)

    metrics.record("uid", "node-1", "ns", "vm", STATS, GuestInfo(agent_connected=False))
    assert not any(s.startswith("kubevirt_vmi_filesystem") for s in _scrape(registry))


async def test_a_vmi_whose_launcher_is_not_reached_reports_nothing(
    node: Node, registry: MetricsRegistry
) -> None:
    node.put_vmi(node.vmi_body("Scheduled"))
    node.put_pod(node.pod_body("Running"))
    node.sockets_dir()  # no launcher-sock
    await node.sync.reconcile(node.key)
    metrics = GuestMetrics(registry, node.sync, ready=lambda: False, clock=node.clock)

    await metrics.collect()

    assert {s for s in _scrape(registry) if s.startswith("kubevirt_vmi_")} == set()
    assert "kubevirt_virt_handler_ready_status 0.0" in _scrape(registry)


async def test_a_launcher_that_stops_answering_drops_its_series(
    node: Node, registry: MetricsRegistry
) -> None:
    await _running(node)
    metrics = GuestMetrics(registry, node.sync, ready=lambda: True, clock=node.clock)
    await metrics.collect()
    assert any(s.startswith("kubevirt_vmi_cpu_usage_seconds_total") for s in _scrape(registry))

    node.launcher.down = True  # a launcher busy or hung: every call fails
    await metrics.collect()

    assert {s for s in _scrape(registry) if s.startswith("kubevirt_vmi_")} == set()


async def test_collection_repeats_on_the_injected_clock(
    node: Node, registry: MetricsRegistry
) -> None:
    await _running(node)
    metrics = GuestMetrics(registry, node.sync, ready=lambda: True, interval=30, clock=node.clock)
    stop = asyncio.Event()
    task = asyncio.ensure_future(metrics.run(stop))

    await node.clock.advance(0)
    assert node.launcher.calls.count("GetDomainStats") == 1
    await node.clock.advance(29)
    assert node.launcher.calls.count("GetDomainStats") == 1
    await node.clock.advance(1)
    assert node.launcher.calls.count("GetDomainStats") == 2

    stop.set()
    await asyncio.wait_for(task, 5)
