"""RFC 6902 JSON patches: the difference between an object and its defaulted copy."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["diff", "escape"]


def escape(key: str) -> str:
    """A JSON pointer token for `key` (RFC 6901: `~` -> `~0`, `/` -> `~1`)."""
    return key.replace("~", "~0").replace("/", "~1")


def diff(before: Any, after: Any, path: str = "") -> list[dict[str, Any]]:
    """Operations turning `before` into `after`; lists that differ are replaced whole.

    Defaulting only adds and fills in, so replacing a changed list keeps patches short
    and avoids index arithmetic over concurrent edits.
    """
    if isinstance(before, Mapping) and isinstance(after, Mapping):
        ops: list[dict[str, Any]] = []
        for key, value in after.items():
            child = f"{path}/{escape(str(key))}"
            if key not in before:
                ops.append({"op": "add", "path": child, "value": value})
            else:
                ops.extend(diff(before[key], value, child))
        for key in before:
            if key not in after:
                ops.append({"op": "remove", "path": f"{path}/{escape(str(key))}"})
        return ops
    if before == after and type(before) is type(after):
        return []
    return [{"op": "replace", "path": path or "", "value": after}]
