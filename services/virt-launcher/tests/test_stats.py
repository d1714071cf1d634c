"""libvirt's bulk statistics become DomainStats under the VMI's device names."""

from __future__ import annotations

import datetime

from virt_launcher.stats import device_names, to_domain_stats
from virt_rpc import DomainState

XML = """<domain><devices>
  <disk><target dev='vda'/><alias name='ua-rootdisk'/></disk>
  <disk><target dev='sda'/><alias name='sata0-0-0'/></disk>
  <interface><target dev='tap0'/><alias name='ua-default'/></interface>
</devices></domain>"""

RAW: dict[str, object] = {
    "cpu.time": 5_000_000,
    "cpu.user": 3_000_000,
    "cpu.system": 1_000_000,
    "vcpu.current": 2,
    "vcpu.0.state": 1,
    "vcpu.0.time": 100,
    "vcpu.0.wait": 7,
    "vcpu.1.state": 2,
    "vcpu.1.time": 200,
    "balloon.current": 131072,
    "balloon.rss": 90000,
    "block.count": 2,
    "block.0.name": "vda",
    "block.0.rd.bytes": 4096,
    "block.0.wr.reqs": 3,
    "block.0.capacity": 1 << 30,
    "block.1.name": "sda",
    "net.count": 1,
    "net.0.name": "tap0",
    "net.0.rx.bytes": 1500,
    "net.0.tx.pkts": 2,
}


def test_devices_are_named_after_their_user_alias() -> None:
    assert device_names(XML) == {"vda": "rootdisk", "tap0": "default"}


def test_counters_are_carried_over() -> None:
    at = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)

    stats = to_domain_stats(RAW, XML, at)

    assert stats.collected_at == at
    assert (stats.cpu_time_ns, stats.cpu_user_ns, stats.cpu_system_ns) == (
        5_000_000,
        3_000_000,
        1_000_000,
    )
    assert [(v.id, v.state, v.time_ns, v.wait_ns) for v in stats.vcpus] == [
        (0, DomainState.RUNNING, 100, 7),
        (1, DomainState.BLOCKED, 200, 0),
    ]
    assert stats.memory is not None
    assert (stats.memory.actual_balloon_kib, stats.memory.rss_kib) == (131072, 90000)
    vda, sda = stats.block
    assert (vda.name, vda.device, vda.read_bytes, vda.write_requests, vda.capacity_bytes) == (
        "rootdisk", "vda", 4096, 3, 1 << 30,
    )  # fmt: skip
    assert (sda.name, sda.device) == ("", "sda")
    (net,) = stats.network
    assert (net.name, net.device, net.rx_bytes, net.tx_packets) == ("default", "tap0", 1500, 2)


def test_missing_or_odd_values_become_zero() -> None:
    stats = to_domain_stats({"cpu.time": "n/a", "block.count": 1}, "", datetime.datetime.now())

    assert stats.cpu_time_ns == 0
    assert stats.block[0].device == ""


def test_an_outgoing_migrations_job_figures_are_reported() -> None:
    raw = {
        **RAW,
        "job.type": 2,
        "job.operation": 3,
        "job.data_total": 1000,
        "job.data_processed": 600,
        "job.data_remaining": 400,
        "job.memory_dirty_rate": 50,
        "job.memory_bps": 300,
    }
    job = to_domain_stats(raw, XML, datetime.datetime.now(datetime.UTC)).migration_job
    assert job is not None
    assert (job.data_total_bytes, job.data_processed_bytes, job.data_remaining_bytes) == (
        1000,
        600,
        400,
    )
    assert job.memory_dirty_rate_bytes_per_second == 50
    assert job.memory_transfer_rate_bytes_per_second == 300


def test_no_migration_job_no_figures() -> None:
    now = datetime.datetime.now(datetime.UTC)
    assert to_domain_stats(RAW, XML, now).migration_job is None
    incoming = {**RAW, "job.type": 2, "job.operation": 2, "job.data_total": 1}
    assert to_domain_stats(incoming, XML, now).migration_job is None
