"""Writes of managed objects: server-side apply as `virt-operator`, only when the live
object lacks something the rendered one says (so an unchanged install writes nothing, and
a deleted or edited object is put back)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from kube_runtime import JsonPatchOp, Resource

from .resources import resource_for
from .wellknown import FIELD_MANAGER

__all__ = ["Api", "Applier", "LiveObjects", "contains"]


class Api(Protocol):
    """The API server calls the operator makes (kube_runtime.KubeClient has them)."""

    async def apply(
        self,
        resource: Resource,
        body: Mapping[str, Any],
        *,
        field_manager: str | None = None,
        force: bool = False,
        subresource: str | None = None,
    ) -> Any: ...

    async def get(self, resource: Resource, name: str, namespace: str | None = None) -> Any: ...

    async def delete(
        self,
        resource: Resource,
        name: str,
        namespace: str | None = None,
        *,
        uid: str | None = None,
        resource_version: str | None = None,
        propagation: str | None = None,
        grace_period_seconds: int | None = None,
        dry_run: bool = False,
    ) -> Any: ...

    async def merge_patch(
        self,
        resource: Resource,
        name: str,
        patch: Mapping[str, Any],
        namespace: str | None = None,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> Any: ...

    async def json_patch(
        self,
        resource: Resource,
        name: str,
        ops: Sequence[JsonPatchOp],
        namespace: str | None = None,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> Any: ...

    async def list(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
        resource_version: str | None = None,
        request_timeout: float | None = None,
    ) -> Any: ...


class LiveObjects(Protocol):
    """The operator's cache of what exists (informers in production)."""

    def lookup(
        self, resource: Resource, namespace: str | None, name: str
    ) -> Mapping[str, Any] | None: ...


def contains(live: Any, wanted: Any) -> bool:
    """True when `live` holds every field `wanted` sets, with the same value (lists match
    element by element and in length; the server's defaults beside them do not count)."""
    if isinstance(wanted, Mapping):
        return isinstance(live, Mapping) and all(
            k in live and contains(live[k], v) for k, v in wanted.items()
        )
    if isinstance(wanted, list | tuple):
        return (
            isinstance(live, list | tuple)
            and len(live) == len(wanted)
            and all(contains(a, b) for a, b in zip(live, wanted, strict=True))
        )
    return bool(live == wanted)


def _where(obj: Mapping[str, Any]) -> tuple[str | None, str]:
    meta = obj.get("metadata") or {}
    return meta.get("namespace"), str(meta.get("name"))


class Applier:
    """Applies rendered objects that the live cache shows missing or different."""

    def __init__(self, api: Api, live: LiveObjects) -> None:
        self.api = api
        self.live = live
        #: (kind, name) of every write made, in order (tests and logs read it).
        self.writes: list[tuple[str, str]] = []

    def current(self, obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
        namespace, name = _where(obj)
        return self.live.lookup(resource_for(obj), namespace, name)

    def in_place(self, obj: Mapping[str, Any]) -> bool:
        live = self.current(obj)
        return live is not None and contains(live, obj)

    async def ensure(self, obj: Mapping[str, Any]) -> bool:
        """Apply `obj` unless it is in place; True when it wrote."""
        if self.in_place(obj):
            return False
        # force: the operator owns these fields, whoever edited them last (drift).
        await self.api.apply(resource_for(obj), obj, field_manager=FIELD_MANAGER, force=True)
        self.writes.append((str(obj.get("kind")), _where(obj)[1]))
        return True

    async def ensure_all(self, objs: list[dict[str, Any]]) -> int:
        written = 0
        for obj in objs:
            written += await self.ensure(obj)
        return written
