"""virt-api's own metrics with upstream's names: its readiness, and the console, VNC and
port-forward connections it relays (gauges by namespace and VMI, and the time of each
VMI's last connection)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from service_kit import MetricsRegistry

__all__ = ["ApiMetrics"]

_VMI = ["namespace", "vmi"]
# Which gauge counts a relayed stream, by the stream's kind (its first path part).
_STREAMS = {
    "console": (
        "kubevirt_console_active_connections",
        "Amount of active Console connections, broken down by namespace and vmi name.",
    ),
    "vnc": (
        "kubevirt_vnc_active_connections",
        "Amount of active VNC connections, broken down by namespace and vmi name.",
    ),
    "portforward": (
        "kubevirt_portforward_active_tunnels",
        "Amount of active portforward tunnels, broken down by namespace and vmi name.",
    ),
    "usbredir": (
        "kubevirt_usbredir_active_connections",
        "Amount of active USB redirection connections, broken down by namespace and vmi name.",
    ),
}


class ApiMetrics:
    """The series virt-api exports besides the admission and REST client ones."""

    def __init__(self, registry: MetricsRegistry, now: Callable[[], float] = time.time) -> None:
        self.registry = registry
        self.now = now
        self.ready = registry.gauge(
            "kubevirt_virt_api_ready_status",
            "Indication for a virt-api server that is ready to serve requests.",
        )
        self.streams = {
            kind: registry.gauge(name, doc, _VMI) for kind, (name, doc) in _STREAMS.items()
        }
        self.last_connection = registry.gauge(
            "kubevirt_vmi_last_api_connection_timestamp_seconds",
            "Virtual Machine Instance last API connection timestamp. Including VNC, console, "
            "portforward, SSH and usbredir connections.",
            _VMI,
        )

    @contextmanager
    def connection(self, kind: str, namespace: str, vmi: str) -> Iterator[None]:
        """Count one relayed stream (``console``, ``vnc``, ``portforward/…``) while the
        ``with`` block runs, and stamp the VMI's last connection."""
        gauge = self.streams[kind.split("/", 1)[0]]
        labels = {"namespace": namespace, "vmi": vmi}
        self.last_connection.set(labels, self.now())
        gauge.inc(labels)
        try:
            yield
        finally:
            gauge.dec(labels)
