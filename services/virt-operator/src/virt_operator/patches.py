"""spec.customizeComponents.patches: a user's patches over rendered objects, as upstream.

Each names a resource (`resourceName`, `resourceType` = kind, `*` for any name) and carries
a `json` (RFC 6902) or `merge` (RFC 7386) patch as text. A `strategic` patch is applied as
a merge patch (no Go struct tags here to tell lists by key): the documented difference.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kube_runtime import JsonPatchError as PatchError
from kube_runtime import apply_json_patch

__all__ = ["ComponentPatch", "PatchError", "apply_json_patch", "apply_patches", "parse_patches"]


@dataclass(frozen=True, slots=True)
class ComponentPatch:
    resource_name: str
    resource_type: str
    patch: str
    type: str

    def as_json(self) -> dict[str, str]:
        return {
            "resourceName": self.resource_name,
            "resourceType": self.resource_type,
            "patch": self.patch,
            "type": self.type,
        }

    def matches(self, obj: Mapping[str, Any]) -> bool:
        name = (obj.get("metadata") or {}).get("name")
        return obj.get("kind") == self.resource_type and self.resource_name in ("*", name)


def parse_patches(customize: object) -> tuple[ComponentPatch, ...]:
    """The well-formed entries of spec.customizeComponents (others are skipped)."""
    if not isinstance(customize, Mapping):
        return ()
    found = []
    for entry in customize.get("patches") or ():
        if not isinstance(entry, Mapping):
            continue
        values = [entry.get(k) for k in ("resourceName", "resourceType", "patch", "type")]
        if all(isinstance(v, str) and v for v in values):
            name, kind, patch, kind_of_patch = (str(v) for v in values)
            found.append(ComponentPatch(name, kind, patch, kind_of_patch))
    return tuple(found)


def _merge(target: Any, patch: Any) -> Any:
    if not isinstance(patch, Mapping):
        return patch
    out = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = _merge(out.get(key), value)
    return out


def apply_patches(objects: list[dict[str, Any]], patches: Sequence[ComponentPatch]) -> None:
    """Apply each matching patch to `objects` in place; PatchError names a failing one."""
    for patch in patches:
        for i, obj in enumerate(objects):
            if not patch.matches(obj):
                continue
            try:
                body = json.loads(patch.patch)
                if patch.type == "json":
                    objects[i] = apply_json_patch(obj, body)
                elif patch.type in ("merge", "strategic"):
                    objects[i] = _merge(obj, body)
                else:
                    raise PatchError(f"unknown patch type {patch.type!r}")
            except (ValueError, KeyError, IndexError, TypeError) as exc:
                raise PatchError(
                    f"customizeComponents patch of {patch.resource_type}/"
                    f"{patch.resource_name}: {exc}"
                ) from None
