"""virt-handler's metrics against upstream's list: every name it shares has upstream's
type, and the coverage is printed (`pytest -s` shows present and absent names)."""

from __future__ import annotations

from kube_runtime.metrics import RestClientMetrics, WorkQueueMetrics
from kubevirt_api.monitoring import coverage_of
from service_kit import MetricsRegistry
from virt_handler.metrics import GuestMetrics


def test_virt_handlers_metrics_have_upstreams_names_and_types() -> None:
    registry = MetricsRegistry()
    GuestMetrics(registry, sync=None, ready=lambda: True)  # type: ignore[arg-type]
    WorkQueueMetrics(registry, "virt-handler-vmi")
    RestClientMetrics(registry)

    coverage = coverage_of("virt-handler", [(m.name, m.kind) for m in registry.described()])

    print(coverage.report())
    assert coverage.wrong_type == ()
    assert len(coverage.present) >= 43
