"""virt-api's metrics against upstream's list: every name it shares has upstream's type,
and the coverage is printed (`pytest -s` shows present and absent names)."""

from __future__ import annotations

from aiohttp import web
from kube_runtime.metrics import RestClientMetrics
from kubevirt_api import ClusterConfig
from kubevirt_api.monitoring import coverage_of
from service_kit import MetricsRegistry
from virt_api.metrics import ApiMetrics
from virt_api.webhooks import AdmissionContext, add_webhook_routes


async def _stock() -> ClusterConfig:
    return ClusterConfig()


def test_virt_apis_metrics_have_upstreams_names_and_types() -> None:
    registry = MetricsRegistry()
    ApiMetrics(registry)
    context = AdmissionContext(cluster_config=_stock, metrics=registry)
    add_webhook_routes(web.Application(), context)
    RestClientMetrics(registry)

    coverage = coverage_of("virt-api", [(m.name, m.kind) for m in registry.described()])

    print(coverage.report())
    assert coverage.wrong_type == ()
    assert len(coverage.present) >= 9
