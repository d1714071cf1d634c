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


def test_counter_mirrors_a_cumulative_source_and_renders_as_a_counter() -> None:
    registry = MetricsRegistry()
    cpu = registry.counter("kubevirt_vmi_cpu_usage_seconds_total", "CPU.", ["name"])
    cpu.set_total({"name": "vm1"}, 12.5)
    cpu.set_total({"name": "vm1"}, 13.0)
    assert cpu.value({"name": "vm1"}) == 13.0
    body = registry.render()[0].decode()
    assert "# TYPE kubevirt_vmi_cpu_usage_seconds_total counter" in body
    cpu.remove({"name": "vm1"})
    assert 'name="vm1"' not in registry.render()[0].decode()
    with pytest.raises(ValueError, match="negative"):
        cpu.set_total({"name": "vm1"}, -1)


def test_registry_describes_what_it_declares() -> None:
    registry = MetricsRegistry()
    registry.gauge("b_gauge", "B.", ["node"])
    registry.counter("a_total", "A.")
    assert [(m.name, m.kind, m.labelnames) for m in registry.described()] == [
        ("a_total", "counter", None),
        ("b_gauge", "gauge", frozenset({"node"})),
    ]


def test_collectors_run_before_each_render_until_removed() -> None:
    registry = MetricsRegistry()
    vms = registry.gauge("kubevirt_vm_info", "VMs.", ["name"])
    cache = ["a", "b"]

    def collect() -> None:
        vms.clear()
        for name in cache:
            vms.set({"name": name}, 1)

    remove = registry.add_collector(collect)
    assert 'name="b"' in registry.render()[0].decode()
    cache.remove("b")
    body = registry.render()[0].decode()
    assert 'name="a"' in body
    assert 'name="b"' not in body
    remove()
    cache.append("c")
    assert 'name="c"' not in registry.render()[0].decode()
