"""Patch bodies: JSON merge patches (RFC 7386) and JSON patches (RFC 6902) with test ops.

Writes patch only the fields a controller owns; these builders compute such patches.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, NotRequired, TypedDict

__all__ = [
    "APPLY_PATCH",
    "JSON_PATCH",
    "MERGE_PATCH",
    "JsonPatchError",
    "JsonPatchOp",
    "apply_json_patch",
    "escape_pointer",
    "merge_patch_between",
    "pointer",
    "replace_if_unchanged",
]

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"


class JsonPatchOp(TypedDict):
    op: Literal["add", "remove", "replace", "test", "move", "copy"]
    path: str
    value: NotRequired[Any]
    # "from" is a keyword: move/copy ops are built with JsonPatchOp(**{"from": ...}).


def escape_pointer(token: str) -> str:
    """Escape one JSON pointer reference token (`~` -> `~0`, `/` -> `~1`)."""
    return token.replace("~", "~0").replace("/", "~1")


def pointer(*tokens: str | int) -> str:
    """Build a JSON pointer from path tokens, e.g. pointer('metadata', 'labels', 'a/b')."""
    return "".join("/" + escape_pointer(str(t)) for t in tokens)


def replace_if_unchanged(path: str, old: Any, new: Any) -> list[JsonPatchOp]:
    """A test-then-replace pair: the server applies it only if `path` still holds `old`.

    With `old` None the path must be absent, so the pair is `add` guarded by nothing
    (RFC 6902 cannot test for absence); callers wanting strictness test a parent instead.
    """
    if old is None:
        return [{"op": "add", "path": path, "value": new}]
    return [
        {"op": "test", "path": path, "value": old},
        {"op": "replace", "path": path, "value": new},
    ]


def merge_patch_between(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """The RFC 7386 merge patch that turns `old` into `new` (removed keys become null)."""
    patch: dict[str, Any] = {}
    for key in old:
        if key not in new:
            patch[key] = None
    for key, value in new.items():
        before = old.get(key, _MISSING)
        if isinstance(value, Mapping) and isinstance(before, Mapping):
            sub = merge_patch_between(before, value)
            if sub:
                patch[key] = sub
        elif before is _MISSING or not _json_equal(before, value):
            patch[key] = _plain(value)
    return patch


_MISSING: Any = object()


def _json_equal(a: Any, b: Any) -> bool:
    return bool(_plain(a) == _plain(b))


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return [_plain(v) for v in value]
    return value


class JsonPatchError(ValueError):
    """A JSON patch does not apply; the message names the failing operation."""


def _tokens(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise JsonPatchError(f"JSON pointer {path!r} must start with /")
    return [t.replace("~1", "/").replace("~0", "~") for t in path[1:].split("/")]


def apply_json_patch(doc: Any, ops: Sequence[Mapping[str, Any]]) -> Any:
    """RFC 6902 add, remove, replace and test on `doc` in place; JsonPatchError when one fails."""
    for op in ops:
        tokens = _tokens(str(op.get("path", "")))
        if not tokens:
            raise JsonPatchError("a JSON patch may not replace the whole object")
        *parents, last = tokens
        node = doc
        for token in parents:
            node = node[int(token)] if isinstance(node, list) else node[token]
        kind = op.get("op")
        if kind == "test":
            here = node[int(last)] if isinstance(node, list) else node.get(last)
            if here != op.get("value"):
                raise JsonPatchError(f"test of {op.get('path')} failed")
            continue
        if isinstance(node, list):
            index = len(node) if last == "-" else int(last)
            if kind == "add":
                node.insert(index, op["value"])
            elif kind == "replace":
                node[index] = op["value"]
            elif kind == "remove":
                del node[index]
            else:
                raise JsonPatchError(f"unsupported JSON patch op {kind!r}")
        elif kind in ("add", "replace"):
            if kind == "replace" and last not in node:
                raise JsonPatchError(f"replace of a missing {op.get('path')}")
            node[last] = op["value"]
        elif kind == "remove":
            del node[last]
        else:
            raise JsonPatchError(f"unsupported JSON patch op {kind!r}")
    return doc
