"""Writes a controller makes for an owner: creations and deletions it expects to see in its
informers, status patches only when something changed, and its finalizer on objects."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kube_runtime import (
    VIRTUAL_MACHINES,
    ApiError,
    JsonPatchOp,
    KubeClient,
    RawObject,
    Resource,
    pointer,
)

from .expectations import Expectations
from .objects import meta, status_changes, uid

__all__ = [
    "create_expected",
    "delete_expected",
    "patch_status_if_changed",
    "set_finalizer",
    "set_vm_status_field",
]


async def create_expected(
    client: KubeClient,
    resource: Resource,
    body: Mapping[str, Any],
    expectations: Expectations,
    owner_key: str,
) -> Any:
    """Create `body`, one of the creations `owner_key` expects (given up again on failure)."""
    try:
        return await client.create(resource, body)
    except Exception:
        expectations.creation_observed(owner_key)
        raise


async def delete_expected(
    client: KubeClient,
    resource: Resource,
    obj: RawObject,
    expectations: Expectations,
    owner_key: str,
) -> bool:
    """Delete `obj` (guarded by its uid), one of the deletions `owner_key` expects.

    False when it was already gone or replaced (nothing to wait for); other errors raise.
    """
    m = meta(obj)
    try:
        await client.delete(resource, str(m["name"]), str(m["namespace"]), uid=uid(obj))
    except ApiError as exc:
        expectations.deletion_observed(owner_key, uid(obj))
        if not (exc.not_found or exc.conflict):
            raise
        return False
    return True


async def patch_status_if_changed(
    client: KubeClient, resource: Resource, obj: RawObject, wanted: Mapping[str, Any]
) -> None:
    """Patch the fields of `wanted` that differ from obj.status; nothing when none do."""
    patch = status_changes(obj, wanted)
    if not patch:
        return
    m = meta(obj)
    try:
        await client.patch_status(resource, str(m["name"]), patch, str(m["namespace"]))
    except ApiError as exc:
        if not exc.not_found:
            raise


async def set_finalizer(
    client: KubeClient, resource: Resource, obj: RawObject, finalizer: str, present: bool
) -> None:
    """Add or remove `finalizer`, guarded by the uid and the finalizers seen; no write when
    it already is as wanted."""
    m = meta(obj)
    finalizers = list(m.get("finalizers") or ())
    if (finalizer in finalizers) == present:
        return
    wanted = [*finalizers, finalizer] if present else [f for f in finalizers if f != finalizer]
    ops: list[JsonPatchOp] = [{"op": "test", "path": "/metadata/uid", "value": uid(obj)}]
    if "finalizers" in m:
        ops.append({"op": "test", "path": "/metadata/finalizers", "value": finalizers})
    ops.append({"op": "add", "path": "/metadata/finalizers", "value": wanted})
    try:
        await client.json_patch(resource, str(m["name"]), ops, str(m["namespace"]))
    except ApiError as exc:
        if not exc.not_found:
            raise


async def set_vm_status_field(
    client: KubeClient,
    vm: RawObject,
    field: str,
    value: Any,
    *,
    expected: Any = None,
) -> bool:
    """Set one field of the VM's status (None removes it), and nothing else, through a JSON
    patch on the status subresource guarded by the uid and, given `expected`, by the
    field's present value. False when the VM is gone or changed meanwhile (its next event
    brings the caller back)."""
    m = meta(vm)
    path = pointer("status", field)
    ops: list[JsonPatchOp] = [{"op": "test", "path": "/metadata/uid", "value": uid(vm)}]
    if expected is not None:
        ops.append({"op": "test", "path": path, "value": expected})
    if value is None:
        ops.append({"op": "remove", "path": path})
    else:
        if not vm.get("status"):
            ops.append({"op": "add", "path": "/status", "value": {}})
        ops.append({"op": "add", "path": path, "value": value})
    try:
        await client.json_patch(
            VIRTUAL_MACHINES, str(m["name"]), ops, str(m["namespace"]), subresource="status"
        )
    except ApiError as exc:
        if exc.not_found or exc.conflict or exc.status == 422:
            return False
        raise
    return True
