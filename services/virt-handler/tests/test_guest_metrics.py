"""Guest metrics carry KubeVirt's names and labels, and only for launchers that answer."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest
from service_kit import MetricsRegistry
from virt_handler.metrics import GuestMetrics
from virt_rpc import BlockStats, DomainStats, MemoryStats, NetworkStats, VcpuStats

if TYPE_CHECKING:
    from conftest import Node

STATS = DomainStats(
    cpu_time_ns=3_000_000_000,
    cpu_user_ns=2_000_000_000,
    cpu_system_ns=1_000_000_000,
    vcpus=[VcpuStats(id=0, time_ns=1_500_000_000, wait_ns=500_000_000)],
    memory=MemoryStats(rss_kib=2048, available_kib=1024, major_faults=3),
    block=[BlockStats(name="rootdisk", device="vda", read_bytes=4096, read_time_ns=2_000_000_000)],
    network=[NetworkStats(name="default", device="tap0", rx_bytes=100, tx_packets=2)],
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
        _sample("kubevirt_vmi_vcpu_seconds_total", 'id="0",' + VMI + ',state="wait"', 0.5),
        _sample("kubevirt_vmi_storage_read_traffic_bytes_total", drive, 4096.0),
        _sample("kubevirt_vmi_storage_read_times_seconds_total", drive, 2.0),
        _sample("kubevirt_vmi_network_receive_bytes_total", nic, 100.0),
        _sample("kubevirt_vmi_network_transmit_packets_total", nic, 2.0),
        _sample("kubevirt_virt_handler_ready_status", 'node="node-1"', 1.0),
    ):
        assert sample in scraped, sample


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
    assert _sample("kubevirt_virt_handler_ready_status", 'node="node-1"', 0.0) in _scrape(registry)


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
