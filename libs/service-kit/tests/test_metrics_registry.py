"""Counters, gauges and histograms keep one label set each and refuse misuse clearly."""

from __future__ import annotations

import pytest
from service_kit import MetricsRegistry


def test_counter_counts_per_label_set() -> None:
    registry = MetricsRegistry()
    requests = registry.counter(
        "kubevirt_rest_client_requests_total", "Requests.", ["code", "method"]
    )
    requests.inc({"code": "200", "method": "GET"})
    requests.inc({"code": "200", "method": "GET"}, 2)
    requests.inc({"code": "404", "method": "GET"})
    assert requests.value({"code": "200", "method": "GET"}) == 3
    assert requests.value({"code": "404", "method": "GET"}) == 1
    assert requests.value({"code": "500", "method": "GET"}) == 0


def test_counter_cannot_decrease() -> None:
    counter = MetricsRegistry().counter("x_total", "X.")
    with pytest.raises(ValueError, match="cannot decrease"):
        counter.inc(None, -1)


def test_gauge_moves_both_ways_and_series_can_be_removed() -> None:
    gauge = MetricsRegistry().gauge("kubevirt_vmi_phase_count", "VMIs per phase.", ["phase"])
    gauge.set({"phase": "running"}, 3)
    gauge.inc({"phase": "running"})
    gauge.dec({"phase": "running"}, 2)
    assert gauge.value({"phase": "running"}) == 2
    gauge.remove({"phase": "running"})
    assert gauge.value({"phase": "running"}) == 0


def test_histogram_counts_and_sums() -> None:
    hist = MetricsRegistry().histogram("op_seconds", "Op time.", buckets=[0.1, 1, 10])
    hist.observe({}, 0.05)
    hist.observe({}, 5)
    assert hist.count() == 2
    assert hist.sum() == pytest.approx(5.05)
    with hist.time():
        pass
    assert hist.count() == 3


def test_wrong_label_names_are_refused_with_expected_ones() -> None:
    counter = MetricsRegistry().counter("x_total", "X.", ["verb"])
    with pytest.raises(ValueError, match=r"labels \['method'\] given, expected exactly \['verb'\]"):
        counter.inc({"method": "GET"})


def test_undeclared_labels_are_fixed_by_first_use() -> None:
    counter = MetricsRegistry().counter("x_total", "X.")
    counter.inc({"name": "queue-a"})
    with pytest.raises(ValueError, match="expected exactly"):
        counter.inc({})


def test_same_name_returns_same_metric_other_kind_is_refused() -> None:
    registry = MetricsRegistry()
    assert registry.counter("x_total", "X.") is registry.counter("x_total", "X.")
    with pytest.raises(ValueError, match="already registered as a counter"):
        registry.gauge("x_total", "X.")


@pytest.mark.parametrize("name", ["", "9lives", "has-dash", "sp ace"])
def test_invalid_metric_names_are_refused(name: str) -> None:
    with pytest.raises(ValueError, match="must match"):
        MetricsRegistry().counter(name, "X.")


@pytest.mark.parametrize("label", ["__reserved", "has-dash", "1st"])
def test_invalid_label_names_are_refused(label: str) -> None:
    with pytest.raises(ValueError, match="label name"):
        MetricsRegistry().counter("x_total", "X.", [label])


def test_histogram_buckets_must_ascend() -> None:
    with pytest.raises(ValueError, match="strictly ascending"):
        MetricsRegistry().histogram("h", "H.", buckets=[1, 0.5])
