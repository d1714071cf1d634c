"""KubeVirt's controller metrics: VMI phase transition times and VM/VMI info gauges."""

from __future__ import annotations

from collections.abc import Mapping

from service_kit import Gauge, MetricsRegistry

__all__ = ["PHASE_TRANSITION_BUCKETS", "ControllerMetrics"]

# Upstream's buckets for phase transition times (seconds).
PHASE_TRANSITION_BUCKETS = (0.5, 1, 2, 5, 10, 20, 30, 40, 50, 60, 90, 120, 180, 240, 300, 600)


class ControllerMetrics:
    """The kubevirt_vmi_* and kubevirt_vm_* series virt-controller exports."""

    def __init__(self, registry: MetricsRegistry) -> None:
        self.registry = registry
        self.phase_from_creation = registry.histogram(
            "kubevirt_vmi_phase_transition_time_from_creation_seconds",
            "Histogram of VM phase transitions duration from creation time in seconds.",
            PHASE_TRANSITION_BUCKETS,
        )
        self.vmi_info = registry.gauge(
            "kubevirt_vmi_info", "Information about VirtualMachineInstances."
        )
        self.vm_info = registry.gauge("kubevirt_vm_info", "Information about Virtual Machines.")
        self._vmi_labels: dict[str, dict[str, str]] = {}
        self._vm_labels: dict[str, dict[str, str]] = {}

    def observe_phase(self, phase: str, seconds: float) -> None:
        self.phase_from_creation.observe({"phase": phase}, max(0.0, seconds))

    def set_vmi(self, key: str, labels: Mapping[str, str] | None) -> None:
        """Keep one info series per VMI (None removes it)."""
        _replace(self.vmi_info, self._vmi_labels, key, labels)

    def set_vm(self, key: str, labels: Mapping[str, str] | None) -> None:
        _replace(self.vm_info, self._vm_labels, key, labels)


def _replace(
    gauge: Gauge, seen: dict[str, dict[str, str]], key: str, labels: Mapping[str, str] | None
) -> None:
    old = seen.get(key)
    new = dict(labels) if labels is not None else None
    if old == new:
        return
    if old is not None:
        gauge.remove(old)
        del seen[key]
    if new is not None:
        gauge.set(new, 1)
        seen[key] = new
