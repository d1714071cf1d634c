"""Guest metrics with KubeVirt's names, read from each launcher's GetDomainStats.

Cumulative libvirt counters are exported as counters holding libvirt's totals (they only
grow while a domain runs; a new domain is a counter reset); a VMI that leaves the node has
its series removed. The guest agent's filesystems come from the domain the launcher last
reported (its Notify events), so they exist only while an agent is connected.
"""

from __future__ import annotations

import asyncio
import platform
from collections.abc import Callable, Sequence
from importlib import metadata

import grpclib
from grpclib.exceptions import StreamTerminatedError
from kube_runtime import Clock, SystemClock, sleep_or_stop
from service_kit import Counter, Gauge, MetricsRegistry, get_logger
from virt_rpc import DomainState, DomainStats, GetDomainStatsRequest, GuestInfo

from .vmi_sync import VmiSync

__all__ = ["GuestMetrics"]

_log = get_logger(__name__)
_NS = 1e-9
_KIB = 1024.0

# name -> (doc, extractor over DomainStats) for per-VMI series.
_VMI: dict[str, tuple[str, Callable[[DomainStats], float | None]]] = {
    "kubevirt_vmi_cpu_usage_seconds_total": (
        "Total CPU time spent in all modes.",
        lambda s: s.cpu_time_ns * _NS,
    ),
    "kubevirt_vmi_cpu_user_usage_seconds_total": (
        "Total CPU time spent in user mode.",
        lambda s: s.cpu_user_ns * _NS,
    ),
    "kubevirt_vmi_cpu_system_usage_seconds_total": (
        "Total CPU time spent in system mode.",
        lambda s: s.cpu_system_ns * _NS,
    ),
    "kubevirt_vmi_memory_resident_bytes": (
        "Resident set size of the process running the domain.",
        lambda s: s.memory.rss_kib * _KIB if s.memory else None,
    ),
    "kubevirt_vmi_memory_available_bytes": (
        "Amount of usable memory as seen by the domain.",
        lambda s: s.memory.available_kib * _KIB if s.memory else None,
    ),
    "kubevirt_vmi_memory_unused_bytes": (
        "The amount of memory left completely unused by the system.",
        lambda s: s.memory.unused_kib * _KIB if s.memory else None,
    ),
    "kubevirt_vmi_memory_usable_bytes": (
        "The amount of memory which can be reclaimed by balloon without pushing the guest system to swap.",
        lambda s: s.memory.usable_kib * _KIB if s.memory else None,
    ),
    "kubevirt_vmi_memory_actual_balloon_bytes": (
        "Current balloon size in bytes.",
        lambda s: s.memory.actual_balloon_kib * _KIB if s.memory else None,
    ),
    "kubevirt_vmi_memory_swap_in_traffic_bytes": (
        "The total amount of data read from swap space of the guest in bytes.",
        lambda s: s.memory.swap_in_kib * _KIB if s.memory else None,
    ),
    "kubevirt_vmi_memory_swap_out_traffic_bytes": (
        "The total amount of memory written out to swap space of the guest in bytes.",
        lambda s: s.memory.swap_out_kib * _KIB if s.memory else None,
    ),
    "kubevirt_vmi_memory_pgmajfault_total": (
        "The number of page faults when disk IO was required.",
        lambda s: float(s.memory.major_faults) if s.memory else None,
    ),
    "kubevirt_vmi_memory_pgminfault_total": (
        "The number of other page faults, when disk IO was not required.",
        lambda s: float(s.memory.minor_faults) if s.memory else None,
    ),
}
_STORAGE = {
    "kubevirt_vmi_storage_read_traffic_bytes_total": (
        "Total number of bytes read from storage.",
        "read_bytes",
        1.0,
    ),
    "kubevirt_vmi_storage_write_traffic_bytes_total": (
        "Total number of written bytes.",
        "write_bytes",
        1.0,
    ),
    "kubevirt_vmi_storage_iops_read_total": (
        "Total number of I/O read operations.",
        "read_requests",
        1.0,
    ),
    "kubevirt_vmi_storage_iops_write_total": (
        "Total number of I/O write operations.",
        "write_requests",
        1.0,
    ),
    "kubevirt_vmi_storage_read_times_seconds_total": (
        "Total time spent on read operations.",
        "read_time_ns",
        _NS,
    ),
    "kubevirt_vmi_storage_write_times_seconds_total": (
        "Total time spent on write operations.",
        "write_time_ns",
        _NS,
    ),
    "kubevirt_vmi_storage_flush_requests_total": (
        "Total storage flush requests.",
        "flush_requests",
        1.0,
    ),
    "kubevirt_vmi_storage_flush_times_seconds_total": (
        "Total time spent on cache flushing.",
        "flush_time_ns",
        _NS,
    ),
}
_NETWORK = {
    "kubevirt_vmi_network_receive_bytes_total": (
        "Total network traffic received in bytes.",
        "rx_bytes",
    ),
    "kubevirt_vmi_network_transmit_bytes_total": (
        "Total network traffic transmitted in bytes.",
        "tx_bytes",
    ),
    "kubevirt_vmi_network_receive_packets_total": (
        "Total network traffic received packets.",
        "rx_packets",
    ),
    "kubevirt_vmi_network_transmit_packets_total": (
        "Total network traffic transmitted packets.",
        "tx_packets",
    ),
    "kubevirt_vmi_network_receive_errors_total": (
        "Total network received error packets.",
        "rx_errors",
    ),
    "kubevirt_vmi_network_transmit_errors_total": (
        "Total network transmitted error packets.",
        "tx_errors",
    ),
    "kubevirt_vmi_network_receive_packets_dropped_total": (
        "The total number of rx packets dropped on vNIC interfaces.",
        "rx_dropped",
    ),
    "kubevirt_vmi_network_transmit_packets_dropped_total": (
        "The total number of tx packets dropped on vNIC interfaces.",
        "tx_dropped",
    ),
}
# An outgoing migration's job figures (upstream's migrationdomainstats collector).
_MIGRATION: dict[str, tuple[str, str]] = {
    "kubevirt_vmi_migration_data_bytes_total": (
        "The total Guest OS data to be migrated to the new VM.",
        "data_total_bytes",
    ),
    "kubevirt_vmi_migration_data_processed_bytes": (
        "The total Guest OS data processed and migrated to the new VM.",
        "data_processed_bytes",
    ),
    "kubevirt_vmi_migration_data_remaining_bytes": (
        "The remaining guest OS data to be migrated to the new VM.",
        "data_remaining_bytes",
    ),
    "kubevirt_vmi_migration_dirty_memory_rate_bytes": (
        "The rate of memory being dirty in the Guest OS.",
        "memory_dirty_rate_bytes_per_second",
    ),
    "kubevirt_vmi_migration_memory_transfer_rate_bytes": (
        "The rate at which the memory is being transferred.",
        "memory_transfer_rate_bytes_per_second",
    ),
}
_BASE = ("node", "namespace", "name")
# libvirt's vCPU states as upstream names them (its humanReadableState).
# (the launcher reports libvirt's OFFLINE as SHUTOFF).
_VCPU_STATES = {
    DomainState.SHUTOFF: "offline",
    DomainState.RUNNING: "running",
    DomainState.BLOCKED: "blocked",
}


def _version() -> str:
    try:
        return "v" + metadata.version("virt-handler")
    except metadata.PackageNotFoundError:
        return "v0.0.0-unknown"


class GuestMetrics:
    """Collects every VMI's stats on an interval into `registry`.

    Cumulative sources (`*_total`) are counters holding the source's total, as upstream's
    collector reports them; levels are gauges.
    """

    def __init__(
        self,
        registry: MetricsRegistry,
        sync: VmiSync,
        ready: Callable[[], bool],
        interval: float = 30.0,
        clock: Clock | None = None,
    ) -> None:
        self.sync = sync
        self.clock = clock or SystemClock()
        self.ready = ready
        self.interval = interval
        self._vmi: dict[str, Counter | Gauge] = {
            n: _declare(registry, n, d, _BASE) for n, (d, _) in _VMI.items()
        }
        self._vcpu = registry.counter(
            "kubevirt_vmi_vcpu_seconds_total",
            "Total amount of time spent in each state by each vcpu (cpu_time excluding "
            "hypervisor time). Where `id` is the vcpu identifier and `state` can be one of "
            "the following: [`OFFLINE`, `RUNNING`, `BLOCKED`].",
            [*_BASE, "id", "state"],
        )
        self._vcpu_wait = registry.counter(
            "kubevirt_vmi_vcpu_wait_seconds_total",
            "Amount of time spent by each vcpu while waiting on I/O.",
            [*_BASE, "id"],
        )
        self._storage = {
            n: registry.counter(n, d, [*_BASE, "drive"]) for n, (d, _, _) in _STORAGE.items()
        }
        self._network = {
            n: registry.counter(n, d, [*_BASE, "interface"]) for n, (d, _) in _NETWORK.items()
        }
        self._traffic = registry.counter(
            "kubevirt_vmi_network_traffic_bytes_total",
            "[Deprecated] Total number of bytes sent and received.",
            [*_BASE, "interface", "type"],
        )
        self._migration = {n: _declare(registry, n, d, _BASE) for n, (d, _) in _MIGRATION.items()}
        fs_labels = [*_BASE, "disk_name", "mount_point", "file_system_type"]
        self._fs_capacity = registry.gauge(
            "kubevirt_vmi_filesystem_capacity_bytes",
            "Total VM filesystem capacity in bytes.",
            fs_labels,
        )
        self._fs_used = registry.gauge(
            "kubevirt_vmi_filesystem_used_bytes", "Used VM filesystem capacity in bytes.", fs_labels
        )
        self._ready = registry.gauge(
            "kubevirt_virt_handler_ready_status",
            "Indication for a virt-handler that is ready to serve requests.",
        )
        registry.gauge("kubevirt_info", "Version information.", ["goversion", "kubeversion"]).set(
            {"goversion": f"python{platform.python_version()}", "kubeversion": _version()}, 1
        )
        self._labels: dict[str, list[tuple[Counter | Gauge, dict[str, str]]]] = {}

    def _set(self, key: str, metric: Counter | Gauge, labels: dict[str, str], value: float) -> None:
        if isinstance(metric, Counter):
            metric.set_total(labels, value)
        else:
            metric.set(labels, value)
        self._labels.setdefault(key, []).append((metric, labels))

    def _clear(self, key: str) -> None:
        for metric, labels in self._labels.pop(key, []):
            metric.remove(labels)

    def record(
        self,
        key: str,
        node: str,
        namespace: str,
        name: str,
        stats: DomainStats,
        guest: GuestInfo | None = None,
    ) -> None:
        """Export one VMI's stats and its guest agent's filesystems (replacing its previous
        series)."""
        self._clear(key)
        base = {"node": node, "namespace": namespace, "name": name}
        for metric, (_, extract) in _VMI.items():
            value = extract(stats)
            if value is not None:
                self._set(key, self._vmi[metric], base, value)
        for vcpu in stats.vcpus:
            vcpu_id = str(vcpu.id)
            state = _VCPU_STATES.get(vcpu.state, "unknown")
            self._set(key, self._vcpu, {**base, "id": vcpu_id, "state": state}, vcpu.time_ns * _NS)
            self._set(key, self._vcpu_wait, {**base, "id": vcpu_id}, vcpu.wait_ns * _NS)
        for block in stats.block:
            for metric, (_, attr, scale) in _STORAGE.items():
                self._set(
                    key,
                    self._storage[metric],
                    {**base, "drive": block.name or block.device},
                    getattr(block, attr) * scale,
                )
        for nic in stats.network:
            interface = nic.name or nic.device
            for metric, (_, attr) in _NETWORK.items():
                self._set(
                    key,
                    self._network[metric],
                    {**base, "interface": interface},
                    float(getattr(nic, attr)),
                )
            for direction, total in (("rx", nic.rx_bytes), ("tx", nic.tx_bytes)):
                labels = {**base, "interface": interface, "type": direction}
                self._set(key, self._traffic, labels, float(total))
        if stats.migration_job is not None:
            for metric, (_, attr) in _MIGRATION.items():
                value = float(getattr(stats.migration_job, attr))
                self._set(key, self._migration[metric], base, value)
        if guest is not None and guest.agent_connected:
            for fs in guest.filesystems:
                labels = {
                    **base,
                    "disk_name": fs.disk_name,
                    "mount_point": fs.mount_point,
                    "file_system_type": fs.type,
                }
                self._set(key, self._fs_capacity, labels, float(fs.total_bytes))
                self._set(key, self._fs_used, labels, float(fs.used_bytes))

    async def collect(self) -> None:
        """One pass over every connected launcher."""
        node = self.sync.settings.node
        self._ready.set(None, 1.0 if self.ready() else 0.0)
        live = set()
        for uid, record in list(self.sync.records.items()):
            conn = record.conn
            running = record.domain is not None and record.domain.state.name == "RUNNING"
            if conn is None or not running:
                continue
            try:
                reply = await conn.cmd.get_domain_stats(GetDomainStatsRequest(), timeout=30)
            except (TimeoutError, grpclib.GRPCError, OSError, StreamTerminatedError) as error:
                _log.debug("domain stats unavailable", name=record.identity.name, error=str(error))
                continue  # as upstream's scrape: no answer, no series (not the last ones)
            if reply.stats is not None:
                live.add(uid)
                identity = record.identity
                self.record(uid, node, identity.namespace, identity.name, reply.stats, record.guest)
        for gone in set(self._labels) - live:
            self._clear(gone)

    async def run(self, stop: asyncio.Event) -> None:
        """Collect until `stop`."""
        while not stop.is_set():
            await self.collect()
            await sleep_or_stop(self.clock, self.interval, stop)


def _declare(
    registry: MetricsRegistry, name: str, doc: str, labels: Sequence[str]
) -> Counter | Gauge:
    # Upstream's rule: a `_total` series counts, everything else is a level.
    if name.endswith("_total"):
        return registry.counter(name, doc, list(labels))
    return registry.gauge(name, doc, list(labels))
