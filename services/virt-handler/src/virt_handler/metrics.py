"""Guest metrics with KubeVirt's names, read from each launcher's GetDomainStats.

Cumulative libvirt counters are exported as they are (the `_total` series only grow
while a domain runs); a VMI that leaves the node has its series removed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

import grpclib
from grpclib.exceptions import StreamTerminatedError
from kube_runtime import Clock, SystemClock, sleep_or_stop
from service_kit import MetricsRegistry
from virt_rpc import DomainStats, GetDomainStatsRequest

from .vmi_sync import VmiSync

__all__ = ["GuestMetrics"]

_log = logging.getLogger(__name__)
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
_BASE = ("node", "namespace", "name")


class GuestMetrics:
    """Collects every VMI's stats on an interval into `registry`."""

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
        self._vmi = {n: registry.gauge(n, d, list(_BASE)) for n, (d, _) in _VMI.items()}
        self._vcpu = registry.gauge(
            "kubevirt_vmi_vcpu_seconds_total",
            "Total amount of time spent in each state by each vcpu.",
            [*_BASE, "id", "state"],
        )
        self._storage = {
            n: registry.gauge(n, d, [*_BASE, "drive"]) for n, (d, _, _) in _STORAGE.items()
        }
        self._network = {
            n: registry.gauge(n, d, [*_BASE, "interface"]) for n, (d, _) in _NETWORK.items()
        }
        self._ready = registry.gauge(
            "kubevirt_virt_handler_ready_status",
            "Indicates if virt-handler is ready (1) or not (0).",
            ["node"],
        )
        self._labels: dict[str, list[tuple[object, dict[str, str]]]] = {}

    def _set(self, key: str, gauge: object, labels: dict[str, str], value: float) -> None:
        gauge.set(labels, value)  # type: ignore[attr-defined]
        self._labels.setdefault(key, []).append((gauge, labels))

    def _clear(self, key: str) -> None:
        for gauge, labels in self._labels.pop(key, []):
            with contextlib.suppress(Exception):
                gauge.remove(labels)  # type: ignore[attr-defined]

    def record(self, key: str, node: str, namespace: str, name: str, stats: DomainStats) -> None:
        """Export one VMI's stats (replacing its previous series)."""
        self._clear(key)
        base = {"node": node, "namespace": namespace, "name": name}
        for metric, (_, extract) in _VMI.items():
            value = extract(stats)
            if value is not None:
                self._set(key, self._vmi[metric], base, value)
        for vcpu in stats.vcpus:
            self._set(
                key,
                self._vcpu,
                {**base, "id": str(vcpu.id), "state": "running"},
                vcpu.time_ns * _NS,
            )
            self._set(
                key, self._vcpu, {**base, "id": str(vcpu.id), "state": "wait"}, vcpu.wait_ns * _NS
            )
        for block in stats.block:
            for metric, (_, attr, scale) in _STORAGE.items():
                self._set(
                    key,
                    self._storage[metric],
                    {**base, "drive": block.name or block.device},
                    getattr(block, attr) * scale,
                )
        for nic in stats.network:
            for metric, (_, attr) in _NETWORK.items():
                self._set(
                    key,
                    self._network[metric],
                    {**base, "interface": nic.name or nic.device},
                    float(getattr(nic, attr)),
                )

    async def collect(self) -> None:
        """One pass over every connected launcher."""
        node = self.sync.settings.node
        self._ready.set({"node": node}, 1.0 if self.ready() else 0.0)
        live = set()
        for uid, record in list(self.sync.records.items()):
            conn = record.conn
            running = record.domain is not None and record.domain.state.name == "RUNNING"
            if conn is None or not running:
                continue
            try:
                reply = await conn.cmd.get_domain_stats(GetDomainStatsRequest(), timeout=30)
            except (TimeoutError, grpclib.GRPCError, OSError, StreamTerminatedError) as error:
                _log.debug("stats of %s: %s", record.identity.name, error)
                continue  # as upstream's scrape: no answer, no series (not the last ones)
            if reply.stats is not None:
                live.add(uid)
                self.record(uid, node, record.identity.namespace, record.identity.name, reply.stats)
        for gone in set(self._labels) - live:
            self._clear(gone)

    async def run(self, stop: asyncio.Event) -> None:
        """Collect until `stop`."""
        while not stop.is_set():
            await self.collect()
            await sleep_or_stop(self.clock, self.interval, stop)
