"""GET /metrics serves the registry in Prometheus' text exposition format."""

from __future__ import annotations

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from service_kit import MetricsRegistry, add_metrics_route


async def test_metrics_route_exposes_labelled_samples() -> None:
    registry = MetricsRegistry()
    registry.counter("kubevirt_workqueue_adds_total", "Adds.", ["name"]).inc({"name": "vmi"}, 4)
    registry.gauge("kubevirt_workqueue_depth", "Depth.", ["name"]).set({"name": "vmi"}, 2)
    hist = registry.histogram("kubevirt_workqueue_queue_duration_seconds", "Wait.", [0.5, 1])
    hist.observe({"name": "vmi"}, 0.25)
    app = web.Application()
    add_metrics_route(app, registry)

    async with TestClient(TestServer(app)) as client:
        response = await client.get("/metrics")
        body = await response.text()

    assert response.status == 200
    assert response.headers["Content-Type"].startswith("text/plain")
    assert "# TYPE kubevirt_workqueue_adds_total counter" in body
    assert 'kubevirt_workqueue_adds_total{name="vmi"} 4' in body
    assert 'kubevirt_workqueue_depth{name="vmi"} 2' in body
    assert 'kubevirt_workqueue_queue_duration_seconds_bucket{le="0.5",name="vmi"} 1' in body
    assert 'kubevirt_workqueue_queue_duration_seconds_count{name="vmi"} 1' in body
