"""KubeVirt's monitoring facts: upstream's metrics per component, and the coverage of a
component's declared metrics against them."""

from kubevirt_api.monitoring.catalogue import (
    COMPONENTS,
    SHARED_GROUPS,
    UPSTREAM_METRICS,
    UpstreamMetric,
    upstream_metrics_of,
)
from kubevirt_api.monitoring.coverage import Coverage, coverage_of

__all__ = [
    "COMPONENTS",
    "SHARED_GROUPS",
    "UPSTREAM_METRICS",
    "Coverage",
    "UpstreamMetric",
    "coverage_of",
    "upstream_metrics_of",
]
