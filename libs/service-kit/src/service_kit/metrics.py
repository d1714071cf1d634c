"""The metrics facade: counters, gauges and histograms with labels, and a /metrics route.

This is the only module that imports aioprometheus (unmaintained since 2023), so
the backend can be swapped here alone. The registry's ``counter``/``gauge``/
``histogram`` match kube_runtime's ``MetricsRegistry`` Protocol, so a
:class:`MetricsRegistry` can be handed to kube_runtime as is.
"""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Final, TypeVar

from aiohttp import web
from aiohttp.typedefs import Handler
from aioprometheus.collectors import Counter as _Counter
from aioprometheus.collectors import Gauge as _Gauge
from aioprometheus.collectors import Histogram as _Histogram
from aioprometheus.collectors import Registry as _Registry
from aioprometheus.renderer import render as _render

__all__ = [
    "DEFAULT_BUCKETS",
    "METRICS_REGISTRY_KEY",
    "Counter",
    "Gauge",
    "Histogram",
    "MetricInfo",
    "MetricsRegistry",
    "add_metrics_route",
    "metrics_handler",
]

Labels = Mapping[str, str]

DEFAULT_BUCKETS: Final[tuple[float, ...]] = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
)  # fmt: skip

_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LABEL = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


def _number(value: object) -> float:
    # aioprometheus types stored values loosely; counters and gauges hold plain numbers.
    if isinstance(value, int | float):
        return float(value)
    raise TypeError(f"unexpected stored metric value {value!r}")


class _Metric:
    """Label bookkeeping shared by every kind: one fixed set of label names per metric."""

    kind = "metric"

    def __init__(self, name: str, doc: str, labelnames: Sequence[str] | None) -> None:
        self.name = name
        self.doc = doc
        if labelnames is not None:
            for label in labelnames:
                _check_label_name(name, label)
        # None until declared or first used; then every use must carry exactly these.
        self._labelnames: frozenset[str] | None = (
            frozenset(labelnames) if labelnames is not None else None
        )

    @property
    def labelnames(self) -> frozenset[str] | None:
        return self._labelnames

    def _labels(self, labels: Labels | None) -> dict[str, str]:
        given = dict(labels or {})
        keys = frozenset(given)
        if self._labelnames is None:
            for label in keys:
                _check_label_name(self.name, label)
            self._labelnames = keys
        elif keys != self._labelnames:
            raise ValueError(
                f"metric {self.name}: labels {sorted(keys)} given, "
                f"expected exactly {sorted(self._labelnames)}"
            )
        for key, value in given.items():
            if not isinstance(value, str):
                raise TypeError(
                    f"metric {self.name}: label {key} must be a str, got {type(value).__name__}"
                )
        return given


class Counter(_Metric):
    """A value that only goes up (resets when the process restarts)."""

    kind = "counter"

    def __init__(self, backend: _Counter, doc: str, labelnames: Sequence[str] | None) -> None:
        super().__init__(backend.name, doc, labelnames)
        self._backend = backend

    def inc(self, labels: Labels | None = None, amount: float = 1.0) -> None:
        """Add ``amount`` (>= 0) to the series named by ``labels``."""
        if amount < 0:
            raise ValueError(f"metric {self.name}: a counter cannot decrease (amount {amount})")
        self._backend.add(self._labels(labels), amount)

    def set_total(self, labels: Labels | None, total: float) -> None:
        """Mirror a cumulative source (libvirt's CPU time, a NIC's bytes): the series holds
        the source's own total. A smaller total means the source restarted (a new domain),
        which Prometheus' rate() reads as a counter reset, as for any restarted process."""
        if total < 0:
            raise ValueError(f"metric {self.name}: a counter's total cannot be negative")
        self._backend.set(self._labels(labels), total)

    def remove(self, labels: Labels | None = None) -> None:
        """Drop the series (its source is gone), so it disappears from /metrics."""
        self._backend.values.pop(self._labels(labels), None)

    def clear(self) -> None:
        """Drop every series (a collector about to report its source's state afresh)."""
        self._backend.values.clear()

    def value(self, labels: Labels | None = None) -> float:
        """Current value of one series (0 when it was never touched)."""
        try:
            return _number(self._backend.get(self._labels(labels)))
        except KeyError:
            return 0.0


class Gauge(_Metric):
    """A value that goes up and down."""

    kind = "gauge"

    def __init__(self, backend: _Gauge, doc: str, labelnames: Sequence[str] | None) -> None:
        super().__init__(backend.name, doc, labelnames)
        self._backend = backend

    def set(self, labels: Labels | None, value: float) -> None:
        """Set the series named by ``labels`` to ``value``."""
        self._backend.set(self._labels(labels), value)

    def inc(self, labels: Labels | None = None, amount: float = 1.0) -> None:
        """Add ``amount`` to the series."""
        self._backend.add(self._labels(labels), amount)

    def dec(self, labels: Labels | None = None, amount: float = 1.0) -> None:
        """Subtract ``amount`` from the series."""
        self._backend.sub(self._labels(labels), amount)

    def remove(self, labels: Labels | None = None) -> None:
        """Drop the series (e.g. a VMI that is gone), so it disappears from /metrics."""
        key = self._labels(labels)
        self._backend.values.pop(key, None)

    def clear(self) -> None:
        """Drop every series (a collector about to report its source's state afresh)."""
        self._backend.values.clear()

    def value(self, labels: Labels | None = None) -> float:
        """Current value of one series (0 when it was never set)."""
        try:
            return _number(self._backend.get(self._labels(labels)))
        except KeyError:
            return 0.0


class Histogram(_Metric):
    """Observations counted in cumulative buckets, with their sum and count."""

    kind = "histogram"

    def __init__(self, backend: _Histogram, doc: str, labelnames: Sequence[str] | None) -> None:
        super().__init__(backend.name, doc, labelnames)
        self._backend = backend

    def observe(self, labels: Labels | None, value: float) -> None:
        """Record one observation in the series named by ``labels``."""
        self._backend.observe(self._labels(labels), float(value))

    @contextmanager
    def time(self, labels: Labels | None = None) -> Iterator[None]:
        """Observe the seconds the ``with`` block took (also when it raises)."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.observe(labels, time.perf_counter() - start)

    def count(self, labels: Labels | None = None) -> int:
        """How many observations the series holds."""
        try:
            return int(_number(self._backend.get(self._labels(labels))["count"]))
        except KeyError:
            return 0

    def sum(self, labels: Labels | None = None) -> float:
        """The sum of the series' observations."""
        try:
            return _number(self._backend.get(self._labels(labels))["sum"])
        except KeyError:
            return 0.0


_M = TypeVar("_M", Counter, Gauge, Histogram)


@dataclass(frozen=True)
class MetricInfo:
    """What a registry declares for one metric: its name, kind (counter, gauge,
    histogram), help text and label names (None: fixed by the first use)."""

    name: str
    kind: str
    doc: str
    labelnames: frozenset[str] | None


def _check_name(name: str) -> None:
    if not _NAME.match(name):
        raise ValueError(f"metric name {name!r} must match {_NAME.pattern}")


def _check_label_name(metric: str, label: str) -> None:
    if not _LABEL.match(label) or label.startswith("__"):
        raise ValueError(
            f"metric {metric}: label name {label!r} must match {_LABEL.pattern} "
            "and not start with '__'"
        )


class MetricsRegistry:
    """The metrics of one process, rendered by its /metrics route.

    Asking for a name twice returns the same metric; asking for it with another
    kind raises ValueError.
    """

    def __init__(self) -> None:
        self._backend = _Registry()
        self._metrics: dict[str, Counter | Gauge | Histogram] = {}
        self._collectors: list[Callable[[], None]] = []

    def _existing(self, name: str, kind: type[_M]) -> _M | None:
        found = self._metrics.get(name)
        if found is None:
            return None
        if not isinstance(found, kind):
            raise ValueError(f"metric {name} is already registered as a {found.kind}")
        return found

    def counter(self, name: str, doc: str, labelnames: Sequence[str] | None = None) -> Counter:
        """The counter ``name``, created on first use."""
        found = self._existing(name, Counter)
        if found is not None:
            return found
        _check_name(name)
        metric = Counter(_Counter(name, doc, registry=self._backend), doc, labelnames)
        self._metrics[name] = metric
        return metric

    def gauge(self, name: str, doc: str, labelnames: Sequence[str] | None = None) -> Gauge:
        """The gauge ``name``, created on first use."""
        found = self._existing(name, Gauge)
        if found is not None:
            return found
        _check_name(name)
        metric = Gauge(_Gauge(name, doc, registry=self._backend), doc, labelnames)
        self._metrics[name] = metric
        return metric

    def histogram(
        self,
        name: str,
        doc: str,
        buckets: Sequence[float] = DEFAULT_BUCKETS,
        labelnames: Sequence[str] | None = None,
    ) -> Histogram:
        """The histogram ``name`` with ascending upper ``buckets`` (+Inf is implied)."""
        found = self._existing(name, Histogram)
        if found is not None:
            return found
        _check_name(name)
        bounds = [float(b) for b in buckets]
        if not bounds or any(b >= c for b, c in itertools.pairwise(bounds)):
            raise ValueError(f"metric {name}: buckets must be non-empty and strictly ascending")
        if bounds[-1] != float("inf"):
            bounds.append(float("inf"))
        backend = _Histogram(name, doc, registry=self._backend, buckets=bounds)
        metric = Histogram(backend, doc, labelnames)
        self._metrics[name] = metric
        return metric

    def described(self) -> list[MetricInfo]:
        """Every metric registered so far, sorted by name (series or not)."""
        return [
            MetricInfo(m.name, m.kind, m.doc, m.labelnames)
            for _, m in sorted(self._metrics.items())
        ]

    def add_collector(self, collect: Callable[[], None]) -> Callable[[], None]:
        """Call ``collect`` before every render, so series read from a cache (an informer's
        store) are current at scrape time, as upstream's collectors are. Returns the
        function that removes it again (e.g. when leadership, and the cache, end)."""
        self._collectors.append(collect)

        def remove() -> None:
            if collect in self._collectors:
                self._collectors.remove(collect)

        return remove

    def render(self, accept: Sequence[str] = ()) -> tuple[bytes, dict[str, str]]:
        """The exposition body and its HTTP headers (Prometheus text format)."""
        for collect in list(self._collectors):
            collect()
        body, headers = _render(self._backend, list(accept))
        return body, {str(k): str(v) for k, v in headers.items()}


METRICS_REGISTRY_KEY: Final = web.AppKey("service_kit.metrics_registry", MetricsRegistry)


def metrics_handler(registry: MetricsRegistry) -> Handler:
    """An aiohttp handler serving ``registry`` in Prometheus' text format."""

    async def handle(request: web.Request) -> web.StreamResponse:
        body, headers = registry.render(request.headers.getall("Accept", []))
        return web.Response(body=body, headers=headers)

    return handle


def add_metrics_route(
    app: web.Application, registry: MetricsRegistry, path: str = "/metrics"
) -> None:
    """Serve ``registry`` at GET ``path`` of ``app``."""
    app[METRICS_REGISTRY_KEY] = registry
    app.router.add_get(path, metrics_handler(registry))
