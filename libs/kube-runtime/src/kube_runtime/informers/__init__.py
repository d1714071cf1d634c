"""Reflector, store and shared informer."""

from .factory import InformerFactory
from .informer import Event, Handler, SharedInformer, Transform, drop_managed_fields
from .listwatch import ListPage, ListWatchSource, RestListWatch, WatchEvent
from .own_writes import UnseenWrites
from .readiness import sync_problems
from .reflector import Reflector, ReflectorSettings, ReflectorSink, ReflectorStats, WatchEnd
from .store import (
    Delta,
    DeltaType,
    FrozenDict,
    IndexFunc,
    ObjectKey,
    RawObject,
    Store,
    freeze,
    key_of,
    resource_version_of,
    thaw,
)

__all__ = [
    "Delta",
    "DeltaType",
    "Event",
    "FrozenDict",
    "Handler",
    "IndexFunc",
    "InformerFactory",
    "ListPage",
    "ListWatchSource",
    "ObjectKey",
    "RawObject",
    "Reflector",
    "ReflectorSettings",
    "ReflectorSink",
    "ReflectorStats",
    "RestListWatch",
    "SharedInformer",
    "Store",
    "Transform",
    "UnseenWrites",
    "WatchEnd",
    "WatchEvent",
    "drop_managed_fields",
    "freeze",
    "key_of",
    "resource_version_of",
    "sync_problems",
    "thaw",
]
