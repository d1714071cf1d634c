"""What every kubevirt-py service needs: logging, metrics, health, TLS, shutdown.

Health and metrics are aiohttp's, and are imported at their first use: a service without
HTTP (the launcher, one per VM) never loads aiohttp.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from service_kit.logs import (
    DEFAULT_VERBOSITY,
    LiveVerbosity,
    bind_context,
    bound_context,
    clear_context,
    configure_logging,
    get_context,
    get_logger,
    level_for_verbosity,
    set_log_level,
    unbind_context,
)
from service_kit.pumping import pump_until_either_ends
from service_kit.runner import (
    EXIT_BACKGROUND_FAILED,
    EXIT_OK,
    EXIT_START_FAILED,
    Background,
    Listener,
    ServiceRunner,
    TCPListener,
    UnixListener,
    run_service,
)
from service_kit.tls import (
    Clock,
    ReloadingContext,
    TLSError,
    TLSFiles,
    client_context,
    server_context,
)

if TYPE_CHECKING:
    from service_kit.health import (
        HEALTH_KEY,
        Check,
        CheckResult,
        Health,
        HealthReport,
        add_health_routes,
    )
    from service_kit.metrics import (
        DEFAULT_BUCKETS,
        METRICS_REGISTRY_KEY,
        Counter,
        Gauge,
        Histogram,
        MetricInfo,
        MetricsRegistry,
        add_metrics_route,
        metrics_handler,
    )

_LAZY = {
    **dict.fromkeys(
        ("HEALTH_KEY", "Check", "CheckResult", "Health", "HealthReport", "add_health_routes"),
        "service_kit.health",
    ),
    **dict.fromkeys(
        (
            "DEFAULT_BUCKETS",
            "METRICS_REGISTRY_KEY",
            "Counter",
            "Gauge",
            "Histogram",
            "MetricInfo",
            "MetricsRegistry",
            "add_metrics_route",
            "metrics_handler",
        ),
        "service_kit.metrics",
    ),
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'service_kit' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "DEFAULT_BUCKETS",
    "DEFAULT_VERBOSITY",
    "EXIT_BACKGROUND_FAILED",
    "EXIT_OK",
    "EXIT_START_FAILED",
    "HEALTH_KEY",
    "METRICS_REGISTRY_KEY",
    "Background",
    "Check",
    "CheckResult",
    "Clock",
    "Counter",
    "Gauge",
    "Health",
    "HealthReport",
    "Histogram",
    "Listener",
    "LiveVerbosity",
    "MetricInfo",
    "MetricsRegistry",
    "ReloadingContext",
    "ServiceRunner",
    "TCPListener",
    "TLSError",
    "TLSFiles",
    "UnixListener",
    "add_health_routes",
    "add_metrics_route",
    "bind_context",
    "bound_context",
    "clear_context",
    "client_context",
    "configure_logging",
    "get_context",
    "get_logger",
    "level_for_verbosity",
    "metrics_handler",
    "pump_until_either_ends",
    "run_service",
    "server_context",
    "set_log_level",
    "unbind_context",
]
