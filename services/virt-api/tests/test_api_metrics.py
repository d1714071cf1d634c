"""virt-api counts the console, VNC and port-forward streams it relays, per VMI, with
upstream's names, and stamps each VMI's last connection."""

from __future__ import annotations

import pytest
from service_kit import MetricsRegistry
from virt_api.metrics import ApiMetrics

VMI = {"namespace": "ns", "vmi": "vm1"}


def test_a_stream_is_counted_while_it_is_open() -> None:
    metrics = ApiMetrics(MetricsRegistry(), now=lambda: 1000.0)
    console = metrics.streams["console"]
    with metrics.connection("console", "ns", "vm1"):
        with metrics.connection("console", "ns", "vm1"):
            assert console.value(VMI) == 2
        assert console.value(VMI) == 1
    assert console.value(VMI) == 0
    assert metrics.last_connection.value(VMI) == 1000.0


def test_port_forward_tunnels_and_vnc_have_their_own_gauges() -> None:
    registry = MetricsRegistry()
    metrics = ApiMetrics(registry)
    with (
        metrics.connection("portforward/22/tcp", "ns", "vm1"),
        metrics.connection("vnc", "ns", "vm1"),
    ):
        body = registry.render()[0].decode()
    assert 'kubevirt_portforward_active_tunnels{namespace="ns",vmi="vm1"} 1' in body
    assert 'kubevirt_vnc_active_connections{namespace="ns",vmi="vm1"} 1' in body


def test_a_stream_that_fails_is_no_longer_counted() -> None:
    metrics = ApiMetrics(MetricsRegistry())
    with pytest.raises(ConnectionResetError), metrics.connection("console", "ns", "vm1"):
        raise ConnectionResetError
    assert metrics.streams["console"].value(VMI) == 0
