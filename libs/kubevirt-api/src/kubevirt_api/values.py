"""Tolerant readers for raw Kubernetes objects: a wrong type reads as absent, never raises.

The edge where raw dicts enter this library's rules (admission, the KubeVirt CR's
configuration, defaulting): the structural schema checked objects in a cluster, but
offline validation and fuzzed reviews did not, so these read their input through here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["as_bool", "as_int", "as_list", "as_map", "as_str", "dig", "object_at"]


def as_map(value: object) -> Mapping[str, Any]:
    """`value` if it is a JSON object, else an empty mapping."""
    return value if isinstance(value, Mapping) else {}


def as_list(value: object) -> Sequence[Any]:
    """`value` if it is a JSON array, else an empty list. A tuple is one too: an informer's
    read-only copy of an object (kube_runtime's freeze) holds its arrays as tuples."""
    return value if isinstance(value, list | tuple) else []


def as_str(value: object) -> str | None:
    """`value` if it is a string, else None."""
    return value if isinstance(value, str) else None


def as_int(value: object) -> int | None:
    """`value` if it is an integer (not a bool), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def as_bool(value: object) -> bool | None:
    """`value` if it is a boolean, else None."""
    return value if isinstance(value, bool) else None


def dig(value: object, *keys: str) -> Any:
    """Follow `keys` through nested objects; None as soon as one is missing."""
    for key in keys:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def object_at(parent: dict[str, Any], key: str) -> dict[str, Any]:
    """For code that edits a copy: ``parent[key]`` as an object, created (or replacing a
    value of another type) when needed."""
    value = parent.get(key)
    if not isinstance(value, dict):
        value = parent[key] = {}
    return value
