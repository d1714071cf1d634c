"""virt-controller's metrics against upstream's list: every name it shares has upstream's
type, and the coverage is printed (`pytest -s` shows present and absent names)."""

from __future__ import annotations

from kube_runtime.metrics import RestClientMetrics, WorkQueueMetrics
from kubevirt_api.monitoring import coverage_of
from service_kit import MetricsRegistry
from virt_controller.metrics import ComponentStatus, ControllerMetrics
from virt_controller.vmstats import CacheCollector


def test_virt_controllers_metrics_have_upstreams_names_and_types() -> None:
    registry = MetricsRegistry()
    ControllerMetrics(registry)
    CacheCollector(registry, list, list)
    ComponentStatus(registry, leading=lambda: True, ready=lambda: True)
    WorkQueueMetrics(registry, "virt-controller-vmi")
    RestClientMetrics(registry)

    coverage = coverage_of("virt-controller", [(m.name, m.kind) for m in registry.described()])

    print(coverage.report())
    assert coverage.wrong_type == ()
    assert len(coverage.present) >= 35
