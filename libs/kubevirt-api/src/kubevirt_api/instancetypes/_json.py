"""Small helpers for editing a JSON object in place (the copies apply works on)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from ..values import object_at

__all__ = ["JSON", "child", "clone", "items", "unset"]

JSON = dict[str, Any]


child = object_at


def items(parent: Mapping[str, Any], key: str) -> list[JSON]:
    """The objects of the list ``parent[key]`` (absent or malformed: none)."""
    value = parent.get(key)
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def unset(parent: Mapping[str, Any], key: str) -> bool:
    """Whether ``parent`` leaves ``key`` out (or null, which the API treats alike)."""
    return parent.get(key) is None


def clone(value: Any) -> Any:
    """A deep copy, so nothing applied shares structure with an instancetype."""
    return copy.deepcopy(value)
