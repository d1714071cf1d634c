"""Reflector, store and shared informer."""

from .informer import Event, Handler, SharedInformer
from .listwatch import ListPage, ListWatchSource, RestListWatch, WatchEvent
from .reflector import Reflector, ReflectorSettings, ReflectorSink, ReflectorStats
from .store import (
    Delta,
    DeltaType,
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
    "Handler",
    "IndexFunc",
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
    "WatchEvent",
    "freeze",
    "key_of",
    "resource_version_of",
    "thaw",
]
