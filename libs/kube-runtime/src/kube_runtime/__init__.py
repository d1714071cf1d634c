"""kube_runtime: informers, work queues, a controller runner and leader election.

What client-go gives Go controllers, on asyncio and kubernetes_asyncio. Every long-running
loop takes a stop event, and time comes from an injected Clock.
"""

from .client import ClientSettings, KubeClient, connect, load_configuration
from .clock import Clock, ManualClock, SystemClock, sleep_or_stop
from .controller import Controller, Reconciler, Result
from .errors import ApiError, ResourceExpiredError
from .events import EventRecorder
from .informers import (
    Delta,
    DeltaType,
    Event,
    FrozenDict,
    Handler,
    IndexFunc,
    InformerFactory,
    ListPage,
    ListWatchSource,
    ObjectKey,
    RawObject,
    Reflector,
    ReflectorSettings,
    RestListWatch,
    SharedInformer,
    Store,
    Transform,
    WatchEvent,
    drop_managed_fields,
    freeze,
    key_of,
    sync_problems,
    thaw,
)
from .leader import KubeLeaseApi, LeaderElectionConfig, LeaderElector, LeaseApi, LeaseRecord
from .metrics import InMemoryMetrics, MetricsRegistry, NullMetrics
from .patching import JsonPatchOp, merge_patch_between, pointer, replace_if_unchanged
from .queue import WorkQueue
from .ratelimit import (
    Backoff,
    ItemExponentialRateLimiter,
    MaxOfRateLimiter,
    RateLimiter,
    TokenBucket,
    TokenBucketRateLimiter,
    default_controller_rate_limiter,
)
from .resources import (
    CONFIGMAPS,
    EVENTS,
    LEASES,
    NODES,
    PODS,
    VIRTUAL_MACHINE_INSTANCES,
    VIRTUAL_MACHINES,
    Resource,
)
from .typed import model_decoder

__all__ = [
    "CONFIGMAPS",
    "EVENTS",
    "LEASES",
    "NODES",
    "PODS",
    "VIRTUAL_MACHINES",
    "VIRTUAL_MACHINE_INSTANCES",
    "ApiError",
    "Backoff",
    "ClientSettings",
    "Clock",
    "Controller",
    "Delta",
    "DeltaType",
    "Event",
    "EventRecorder",
    "FrozenDict",
    "Handler",
    "InMemoryMetrics",
    "IndexFunc",
    "InformerFactory",
    "ItemExponentialRateLimiter",
    "JsonPatchOp",
    "KubeClient",
    "KubeLeaseApi",
    "LeaderElectionConfig",
    "LeaderElector",
    "LeaseApi",
    "LeaseRecord",
    "ListPage",
    "ListWatchSource",
    "ManualClock",
    "MaxOfRateLimiter",
    "MetricsRegistry",
    "NullMetrics",
    "ObjectKey",
    "RateLimiter",
    "RawObject",
    "Reconciler",
    "Reflector",
    "ReflectorSettings",
    "Resource",
    "ResourceExpiredError",
    "RestListWatch",
    "Result",
    "SharedInformer",
    "Store",
    "SystemClock",
    "TokenBucket",
    "TokenBucketRateLimiter",
    "Transform",
    "WatchEvent",
    "WorkQueue",
    "connect",
    "default_controller_rate_limiter",
    "drop_managed_fields",
    "freeze",
    "key_of",
    "load_configuration",
    "merge_patch_between",
    "model_decoder",
    "pointer",
    "replace_if_unchanged",
    "sleep_or_stop",
    "sync_problems",
    "thaw",
]
