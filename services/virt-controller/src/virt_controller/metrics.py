"""KubeVirt's controller metrics: VMI and migration phase transition times, VM/VMI info
gauges, and the migration counts by phase (upstream's names, types and labels)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kubevirt_api.enums import VirtualMachineInstanceMigrationPhase as MigrationPhase
from service_kit import Gauge, MetricsRegistry

from .objects import parse_time

__all__ = ["PHASE_TRANSITION_BUCKETS", "ComponentStatus", "ControllerMetrics"]

# Upstream's buckets for phase transition times (seconds).
PHASE_TRANSITION_BUCKETS = (0.5, 1, 2, 5, 10, 20, 30, 40, 50, 60, 90, 120, 180, 240, 300, 600)


class ComponentStatus:
    """`kubevirt_virt_controller_{leading,ready}_status`, set at each scrape from
    ``leading()`` and ``ready()``."""

    def __init__(
        self, registry: MetricsRegistry, leading: Callable[[], bool], ready: Callable[[], bool]
    ) -> None:
        self.leading = leading
        self.ready = ready
        self.leading_status = registry.gauge(
            "kubevirt_virt_controller_leading_status",
            "Indication for an operating virt-controller.",
        )
        self.ready_status = registry.gauge(
            "kubevirt_virt_controller_ready_status",
            "Indication for a virt-controller that is ready to take the lead.",
        )
        registry.add_collector(self.collect)

    def collect(self) -> None:
        self.leading_status.set(None, 1.0 if self.leading() else 0.0)
        self.ready_status.set(None, 1.0 if self.ready() else 0.0)


class ControllerMetrics:
    """The kubevirt_vmi_* and kubevirt_vm_* series virt-controller exports."""

    def __init__(self, registry: MetricsRegistry) -> None:
        self.registry = registry
        self.phase_from_creation = registry.histogram(
            "kubevirt_vmi_phase_transition_time_from_creation_seconds",
            "Histogram of VM phase transitions duration from creation time in seconds.",
            PHASE_TRANSITION_BUCKETS,
        )
        self.phase_between = registry.histogram(
            "kubevirt_vmi_phase_transition_time_seconds",
            "Histogram of VM phase transitions duration between different phases in seconds.",
            PHASE_TRANSITION_BUCKETS,
        )
        self.phase_from_deletion = registry.histogram(
            "kubevirt_vmi_phase_transition_time_from_deletion_seconds",
            "Histogram of VM phase transitions duration from deletion time in seconds.",
            PHASE_TRANSITION_BUCKETS,
        )
        self.vmi_info = registry.gauge(
            "kubevirt_vmi_info", "Information about VirtualMachineInstances."
        )
        self.vm_info = registry.gauge("kubevirt_vm_info", "Information about Virtual Machines.")
        self._vmi_labels: dict[str, dict[str, str]] = {}
        self._vm_labels: dict[str, dict[str, str]] = {}
        self.non_evictable = registry.gauge(
            "kubevirt_vmi_non_evictable",
            "Indication for a VirtualMachine that its eviction strategy is set to Live Migration"
            " but is not migratable.",
            ["node", "namespace", "name"],
        )
        self._evictable_labels: dict[str, dict[str, str]] = {}
        self.migration_phase_from_creation = registry.histogram(
            "kubevirt_vmi_migration_phase_transition_time_from_creation_seconds",
            "Histogram of VM migration phase transitions duration from creation time in seconds.",
            PHASE_TRANSITION_BUCKETS,
        )
        self.migrations_in_phase = {
            phase: registry.gauge(f"kubevirt_vmi_migrations_in_{phase}_phase", doc)
            for phase, doc in _PHASE_GAUGES.items()
        }
        self.migration_outcome = {
            outcome: registry.gauge(
                f"kubevirt_vmi_migration_{outcome}",
                f"Indicates if the VMI migration {outcome}.",
                ["vmi", "vmim", "namespace"],
            )
            for outcome in ("succeeded", "failed")
        }
        self._outcomes: dict[str, set[tuple[str, str, str]]] = {"succeeded": set(), "failed": set()}

    def observe_phase(
        self,
        phase: str,
        seconds: float,
        since_previous: float | None = None,
        since_deletion: float | None = None,
        previous: str = "",
    ) -> None:
        """A VMI entered ``phase``: seconds since its creation, since it entered its previous
        phase (``previous``) and, when it is being deleted, since its deletion began."""
        self.phase_from_creation.observe({"phase": phase}, max(0.0, seconds))
        if since_previous is not None:
            labels = {"phase": phase, "last_phase": previous}
            self.phase_between.observe(labels, max(0.0, since_previous))
        if since_deletion is not None:
            self.phase_from_deletion.observe({"phase": phase}, max(0.0, since_deletion))

    def set_vmi(self, key: str, labels: Mapping[str, str] | None) -> None:
        """Keep one info series per VMI (None removes it)."""
        _replace(self.vmi_info, self._vmi_labels, key, labels)

    def set_vm(self, key: str, labels: Mapping[str, str] | None) -> None:
        _replace(self.vm_info, self._vm_labels, key, labels)

    def set_non_evictable(
        self, key: str, labels: Mapping[str, str] | None, blocked: bool = False
    ) -> None:
        """1 for a VMI that should migrate on eviction but cannot (None removes it)."""
        _replace(self.non_evictable, self._evictable_labels, key, labels, 1 if blocked else 0)

    def observe_migration(
        self, new: Mapping[str, Any], old: Mapping[str, Any] | None, now: dt.datetime
    ) -> None:
        """A migration's phase changed: how long after its creation (seconds)."""
        phase = _phase(new)
        if old is None or not phase or phase == _phase(old):
            return
        created = parse_time((new.get("metadata") or {}).get("creationTimestamp"))
        if created is not None:
            self.migration_phase_from_creation.observe(
                {"phase": phase}, max(0.0, (now - created).total_seconds())
            )

    def count_migrations(self, migrations: Iterable[Mapping[str, Any]]) -> None:
        """The in-phase gauges and one succeeded/failed series per final migration."""
        counts = dict.fromkeys(_PHASE_GAUGES, 0)
        outcomes: dict[str, set[tuple[str, str, str]]] = {"succeeded": set(), "failed": set()}
        for mig in migrations:
            phase = _phase(mig)
            meta = mig.get("metadata") or {}
            ids = (
                str((mig.get("spec") or {}).get("vmiName") or ""),
                str(meta.get("name") or ""),
                str(meta.get("namespace") or ""),
            )
            if phase == MigrationPhase.SUCCEEDED:
                outcomes["succeeded"].add(ids)
            elif phase == MigrationPhase.FAILED:
                outcomes["failed"].add(ids)
            elif phase in _RUNNING_PHASES:
                counts["running"] += 1
            elif phase in (MigrationPhase.PENDING, MigrationPhase.SCHEDULING):
                counts[phase.lower()] += 1
            elif not phase:
                counts["unset"] += 1
        for name, count in counts.items():
            self.migrations_in_phase[name].set(None, count)
        for outcome, gauge in self.migration_outcome.items():
            for gone in self._outcomes[outcome] - outcomes[outcome]:
                gauge.remove(dict(zip(("vmi", "vmim", "namespace"), gone, strict=True)))
            for ids in outcomes[outcome]:
                gauge.set(dict(zip(("vmi", "vmim", "namespace"), ids, strict=True)), 1)
        self._outcomes = outcomes


_PHASE_GAUGES = {
    "pending": "Number of current pending migrations.",
    "scheduling": "Number of current scheduling migrations.",
    "unset": "Number of current unset migrations. These are pending items the virt-controller"
    " hasn\u2019t processed yet from the queue.",
    "running": "Number of current running migrations.",
}
# Upstream counts every phase between Scheduling and the end as running.
_RUNNING_PHASES = frozenset(
    {
        MigrationPhase.SCHEDULED,
        MigrationPhase.PREPARING_TARGET,
        MigrationPhase.TARGET_READY,
        MigrationPhase.RUNNING,
        MigrationPhase.WAITING_FOR_SYNC,
        MigrationPhase.SYNCHRONIZING,
    }
)


def _phase(obj: Mapping[str, Any]) -> str:
    return str((obj.get("status") or {}).get("phase") or "")


def _replace(
    gauge: Gauge,
    seen: dict[str, dict[str, str]],
    key: str,
    labels: Mapping[str, str] | None,
    value: float = 1,
) -> None:
    old = seen.get(key)
    new = dict(labels) if labels is not None else None
    if old is not None and old != new:
        gauge.remove(old)
        del seen[key]
    if new is not None:
        gauge.set(new, value)
        seen[key] = new
