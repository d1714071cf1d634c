"""Writes of this process that its informer has not shown yet.

A controller that patches an object and is woken again before the watch brings the new
version would compute from the old one: its next write, guarded by the old
resourceVersion, is refused (409), or an unguarded one repeats what was just written.
`UnseenWrites` remembers the version each write was made against; while the cache still
holds that version, the key is not worked on (the watch event of the write wakes it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["UnseenWrites"]


def _version(obj: Mapping[str, Any] | None) -> str:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    return str(meta.get("resourceVersion") or "") if isinstance(meta, Mapping) else ""


class UnseenWrites:
    """Per key, the resourceVersion our last successful write replaced, until the cache
    moves past it."""

    def __init__(self) -> None:
        self._replaced: dict[str, str] = {}

    def wrote(self, key: str, before: Mapping[str, Any], after: Any) -> None:
        """Record a write made against `before` that the server answered with `after`.

        A write that changed nothing (same version) leaves no new version to wait for.
        """
        old, new = _version(before), _version(after if isinstance(after, Mapping) else None)
        if old and new and new != old:
            self._replaced[key] = old

    def pending(self, key: str, cached: Mapping[str, Any]) -> bool:
        """True while the cached object is still the version our last write replaced."""
        replaced = self._replaced.get(key)
        if replaced is None:
            return False
        if _version(cached) == replaced:
            return True
        del self._replaced[key]
        return False

    def forget(self, key: str) -> None:
        self._replaced.pop(key, None)

    def __len__(self) -> int:
        return len(self._replaced)
