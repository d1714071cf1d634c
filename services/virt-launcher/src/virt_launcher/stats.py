"""libvirt's bulk domain statistics, turned into the protocol's DomainStats.

Disks and interfaces are reported under the VMI's names: the converter gives each
device the alias ``ua-<name>``, found here through the device's target in the XML.
"""

from __future__ import annotations

import datetime
import xml.etree.ElementTree as ET
from collections.abc import Mapping

from virt_rpc import (
    BlockStats,
    DomainState,
    DomainStats,
    MemoryStats,
    MigrationJobStats,
    NetworkStats,
    VcpuStats,
)

__all__ = ["device_names", "to_domain_stats"]

_USER_ALIAS = "ua-"
# virVcpuState: offline, running, blocked.
_VCPU_STATES = (DomainState.SHUTOFF, DomainState.RUNNING, DomainState.BLOCKED)

# virDomainJobType UNBOUNDED (a job runs) and virDomainJobOperation MIGRATION_OUT.
_JOB_UNBOUNDED = 2
_JOB_MIGRATION_OUT = 3

RawStats = Mapping[str, object]


def device_names(domain_xml: str) -> dict[str, str]:
    """Target device (``vda``, ``tap0``) -> VMI name, for devices with a ``ua-`` alias."""
    names: dict[str, str] = {}
    if not domain_xml:
        return names
    root = ET.fromstring(domain_xml)
    for device in [*root.iterfind("devices/disk"), *root.iterfind("devices/interface")]:
        target, alias = device.find("target"), device.find("alias")
        if target is None or alias is None:
            continue
        dev, name = target.get("dev"), alias.get("name", "")
        if dev and name.startswith(_USER_ALIAS):
            names[dev] = name.removeprefix(_USER_ALIAS)
    return names


def _int(raw: RawStats, key: str) -> int:
    value = raw.get(key, 0)
    return max(0, int(value)) if isinstance(value, int | float) else 0


def _str(raw: RawStats, key: str) -> str:
    value = raw.get(key, "")
    return value if isinstance(value, str) else ""


def to_domain_stats(raw: RawStats, domain_xml: str, collected_at: datetime.datetime) -> DomainStats:
    """The protocol's statistics from one ``virConnectGetAllDomainStats`` record."""
    names = device_names(domain_xml)
    vcpus = []
    for i in range(_int(raw, "vcpu.current")):
        state = _int(raw, f"vcpu.{i}.state")
        vcpus.append(
            VcpuStats(
                id=i,
                state=_VCPU_STATES[state] if state < len(_VCPU_STATES) else DomainState.UNSPECIFIED,
                time_ns=_int(raw, f"vcpu.{i}.time"),
                wait_ns=_int(raw, f"vcpu.{i}.wait"),
            )
        )
    block = []
    for i in range(_int(raw, "block.count")):
        p = f"block.{i}."
        dev = _str(raw, p + "name")
        block.append(
            BlockStats(
                name=names.get(dev, ""),
                device=dev,
                read_bytes=_int(raw, p + "rd.bytes"),
                read_requests=_int(raw, p + "rd.reqs"),
                read_time_ns=_int(raw, p + "rd.times"),
                write_bytes=_int(raw, p + "wr.bytes"),
                write_requests=_int(raw, p + "wr.reqs"),
                write_time_ns=_int(raw, p + "wr.times"),
                flush_requests=_int(raw, p + "fl.reqs"),
                flush_time_ns=_int(raw, p + "fl.times"),
                allocation_bytes=_int(raw, p + "allocation"),
                capacity_bytes=_int(raw, p + "capacity"),
            )
        )
    network = []
    for i in range(_int(raw, "net.count")):
        p = f"net.{i}."
        dev = _str(raw, p + "name")
        network.append(
            NetworkStats(
                name=names.get(dev, ""),
                device=dev,
                rx_bytes=_int(raw, p + "rx.bytes"),
                rx_packets=_int(raw, p + "rx.pkts"),
                rx_errors=_int(raw, p + "rx.errs"),
                rx_dropped=_int(raw, p + "rx.drop"),
                tx_bytes=_int(raw, p + "tx.bytes"),
                tx_packets=_int(raw, p + "tx.pkts"),
                tx_errors=_int(raw, p + "tx.errs"),
                tx_dropped=_int(raw, p + "tx.drop"),
            )
        )
    memory = MemoryStats(
        actual_balloon_kib=_int(raw, "balloon.current"),
        available_kib=_int(raw, "balloon.available"),
        unused_kib=_int(raw, "balloon.unused"),
        usable_kib=_int(raw, "balloon.usable"),
        rss_kib=_int(raw, "balloon.rss"),
        swap_in_kib=_int(raw, "balloon.swap_in"),
        swap_out_kib=_int(raw, "balloon.swap_out"),
        major_faults=_int(raw, "balloon.major_fault"),
        minor_faults=_int(raw, "balloon.minor_fault"),
    )
    return DomainStats(
        migration_job=_migration_job(raw),
        collected_at=collected_at,
        cpu_time_ns=_int(raw, "cpu.time"),
        cpu_user_ns=_int(raw, "cpu.user"),
        cpu_system_ns=_int(raw, "cpu.system"),
        vcpus=vcpus,
        memory=memory,
        block=block,
        network=network,
    )


def _migration_job(raw: RawStats) -> MigrationJobStats | None:
    """The ``job.*`` keys (virDomainGetJobStats) of a running outgoing migration."""
    if raw.get("job.type") != _JOB_UNBOUNDED or raw.get("job.operation") != _JOB_MIGRATION_OUT:
        return None
    return MigrationJobStats(
        data_total_bytes=_int(raw, "job.data_total"),
        data_processed_bytes=_int(raw, "job.data_processed"),
        data_remaining_bytes=_int(raw, "job.data_remaining"),
        memory_dirty_rate_bytes_per_second=_int(raw, "job.memory_dirty_rate"),
        memory_transfer_rate_bytes_per_second=_int(raw, "job.memory_bps"),
    )
