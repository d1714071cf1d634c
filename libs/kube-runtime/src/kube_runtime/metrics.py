"""The metrics seam and KubeVirt's workqueue and REST client metric names.

kube_runtime records through the small `MetricsRegistry` Protocol below, so the service's
facade (service_kit) plugs in without this library depending on a metrics backend.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

__all__ = [
    "Counter",
    "Gauge",
    "Histogram",
    "InMemoryMetrics",
    "MetricsRegistry",
    "NullMetrics",
    "RestClientMetrics",
    "WorkQueueMetrics",
]

Labels = Mapping[str, str]

# client-go's workqueue buckets: 10ns .. 100s, decades.
WORKQUEUE_BUCKETS: tuple[float, ...] = tuple(10e-9 * 10**i for i in range(10))
# client-go's REST latency buckets (KubeVirt registers the same shape).
REST_LATENCY_BUCKETS: tuple[float, ...] = (0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60)


class Counter(Protocol):
    def inc(self, labels: Labels, amount: float = 1.0) -> None: ...


class Gauge(Protocol):
    def set(self, labels: Labels, value: float) -> None: ...


class Histogram(Protocol):
    def observe(self, labels: Labels, value: float) -> None: ...


class MetricsRegistry(Protocol):
    """What kube_runtime needs from a metrics backend; registering a name twice returns it."""

    def counter(self, name: str, doc: str) -> Counter: ...

    def gauge(self, name: str, doc: str) -> Gauge: ...

    def histogram(self, name: str, doc: str, buckets: Sequence[float]) -> Histogram: ...


def _label_key(labels: Labels) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(labels.items()))


@dataclass
class _Series:
    kind: str
    doc: str
    buckets: tuple[float, ...] = ()
    values: dict[tuple[tuple[str, str], ...], float] = field(default_factory=dict)
    counts: dict[tuple[tuple[str, str], ...], list[int]] = field(default_factory=dict)
    sums: dict[tuple[tuple[str, str], ...], float] = field(default_factory=dict)

    def inc(self, labels: Labels, amount: float = 1.0) -> None:
        key = _label_key(labels)
        self.values[key] = self.values.get(key, 0.0) + amount

    def set(self, labels: Labels, value: float) -> None:
        self.values[_label_key(labels)] = value

    def observe(self, labels: Labels, value: float) -> None:
        key = _label_key(labels)
        counts = self.counts.setdefault(key, [0] * (len(self.buckets) + 1))
        counts[bisect.bisect_left(self.buckets, value)] += 1
        self.sums[key] = self.sums.get(key, 0.0) + value


class InMemoryMetrics:
    """A dependency-free registry: used by default, by tests, and rendered as text format."""

    def __init__(self) -> None:
        self._series: dict[str, _Series] = {}

    def _get(self, name: str, kind: str, doc: str, buckets: Sequence[float] = ()) -> _Series:
        series = self._series.get(name)
        if series is None:
            series = self._series[name] = _Series(kind, doc, tuple(buckets))
        elif series.kind != kind:
            raise ValueError(f"metric {name} is a {series.kind}, not a {kind}")
        return series

    def counter(self, name: str, doc: str) -> Counter:
        return self._get(name, "counter", doc)

    def gauge(self, name: str, doc: str) -> Gauge:
        return self._get(name, "gauge", doc)

    def histogram(self, name: str, doc: str, buckets: Sequence[float]) -> Histogram:
        return self._get(name, "histogram", doc, buckets)

    def value(self, name: str, labels: Labels | None = None) -> float:
        """A counter's or gauge's value, or a histogram's observation count (0 if unseen)."""
        series = self._series.get(name)
        if series is None:
            return 0.0
        key = _label_key(labels or {})
        if series.kind == "histogram":
            return float(sum(series.counts.get(key, [])))
        return series.values.get(key, 0.0)

    def names(self) -> list[str]:
        return sorted(self._series)

    def render(self) -> str:
        """Prometheus text exposition format."""
        lines: list[str] = []
        for name in sorted(self._series):
            s = self._series[name]
            lines.append(f"# HELP {name} {s.doc}")
            lines.append(f"# TYPE {name} {s.kind}")
            if s.kind == "histogram":
                for key, counts in sorted(s.counts.items()):
                    running = 0
                    for bound, count in zip((*s.buckets, math.inf), counts, strict=True):
                        running += count
                        le = "+Inf" if bound == math.inf else repr(bound)
                        lines.append(f"{name}_bucket{_fmt((*key, ('le', le)))} {running}")
                    lines.append(f"{name}_sum{_fmt(key)} {s.sums.get(key, 0.0)}")
                    lines.append(f"{name}_count{_fmt(key)} {running}")
            else:
                for key, value in sorted(s.values.items()):
                    lines.append(f"{name}{_fmt(key)} {value}")
        return "\n".join(lines) + "\n"


def _fmt(key: tuple[tuple[str, str], ...]) -> str:
    if not key:
        return ""
    inner = ",".join(f'{k}="{v}"' for k, v in key)
    return "{" + inner + "}"


class _Null:
    def inc(self, labels: Labels, amount: float = 1.0) -> None:
        pass

    def set(self, labels: Labels, value: float) -> None:
        pass

    def observe(self, labels: Labels, value: float) -> None:
        pass


class NullMetrics:
    """Discards everything (for benchmarks that measure the library, not the registry)."""

    def counter(self, name: str, doc: str) -> Counter:
        return _Null()

    def gauge(self, name: str, doc: str) -> Gauge:
        return _Null()

    def histogram(self, name: str, doc: str, buckets: Sequence[float]) -> Histogram:
        return _Null()


class WorkQueueMetrics:
    """KubeVirt's `kubevirt_workqueue_*` series for one named queue."""

    def __init__(self, registry: MetricsRegistry, name: str) -> None:
        self.labels = {"name": name}
        self.depth = registry.gauge("kubevirt_workqueue_depth", "Current depth of workqueue")
        self.adds = registry.counter(
            "kubevirt_workqueue_adds_total", "Total number of adds handled by workqueue"
        )
        self.latency = registry.histogram(
            "kubevirt_workqueue_queue_duration_seconds",
            "How long an item stays in workqueue before being requested.",
            WORKQUEUE_BUCKETS,
        )
        self.work_duration = registry.histogram(
            "kubevirt_workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes.",
            WORKQUEUE_BUCKETS,
        )
        self.retries = registry.counter(
            "kubevirt_workqueue_retries_total", "Total number of retries handled by workqueue"
        )
        self.unfinished = registry.gauge(
            "kubevirt_workqueue_unfinished_work_seconds",
            "How many seconds of work has done that is in progress and hasn't been observed "
            "by work_duration.",
        )
        self.longest_running = registry.gauge(
            "kubevirt_workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running.",
        )


class RestClientMetrics:
    """KubeVirt's `kubevirt_rest_client_*` series."""

    def __init__(self, registry: MetricsRegistry) -> None:
        self.requests = registry.counter(
            "kubevirt_rest_client_requests_total",
            "Number of HTTP requests, partitioned by status code, method, and host.",
        )
        self.latency = registry.histogram(
            "kubevirt_rest_client_request_latency_seconds",
            "Request latency in seconds. Broken down by verb and URL.",
            REST_LATENCY_BUCKETS,
        )
        self.rate_limiter = registry.histogram(
            "kubevirt_rest_client_rate_limiter_duration_seconds",
            "Client side rate limiter latency in seconds. Broken down by verb and URL.",
            REST_LATENCY_BUCKETS,
        )
