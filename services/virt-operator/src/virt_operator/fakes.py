"""An in-memory API server for tests of the operator (as kube_runtime.fakes): the calls the
reconciler makes (apply, delete, merge patch, list) and the cache it reads (lookup,
managed), plus helpers that play the workload controllers."""

from __future__ import annotations

import builtins
import copy
import datetime
from collections.abc import Mapping, Sequence
from typing import Any

from kube_runtime import ApiError, Resource
from kubevirt_api.resources import KUBEVIRTS

from .patches import PatchError, apply_json_patch
from .wellknown import MANAGED_BY, MANAGED_BY_LABEL

__all__ = ["FakeClock", "FakeCluster", "kubevirt"]

Key = tuple[str, str | None, str]


def _merge(target: Any, patch: Any) -> Any:
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, Mapping) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = _merge(out.get(k), v)
    return out


class FakeCluster:
    """Objects by (plural, namespace, name); every write is recorded in `writes`."""

    def __init__(self) -> None:
        self.objects: dict[Key, dict[str, Any]] = {}
        self.writes: list[tuple[str, str, str]] = []
        self.version = 0

    def _key(self, resource: Resource, namespace: str | None, name: str) -> Key:
        return (resource.plural, namespace if resource.namespaced else None, name)

    def put(self, resource: Resource, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj.setdefault("metadata", {})
        self.version += 1
        meta["resourceVersion"] = str(self.version)
        meta.setdefault("uid", f"uid-{self.version}")
        meta.setdefault("creationTimestamp", f"2026-01-01T00:00:{self.version % 60:02d}Z")
        self.objects[self._key(resource, meta.get("namespace"), meta["name"])] = obj
        return obj

    # -- Api ------------------------------------------------------------------------
    async def apply(
        self,
        resource: Resource,
        body: Mapping[str, Any],
        *,
        field_manager: str | None = None,
        force: bool = False,
        subresource: str | None = None,
    ) -> Any:
        meta = body["metadata"]
        key = self._key(resource, meta.get("namespace"), meta["name"])
        old = self.objects.get(key)
        new = copy.deepcopy(dict(body))
        if old is not None:
            new["status"] = old.get("status", {})
            generation = old["metadata"].get("generation", 1)
            if old.get("spec") != new.get("spec"):
                generation += 1
            new["metadata"]["generation"] = generation
        else:
            new["metadata"]["generation"] = 1
        self.writes.append(("apply", body["kind"], meta["name"]))
        return self.put(resource, new)

    async def get(self, resource: Resource, name: str, namespace: str | None = None) -> Any:
        obj = self.objects.get(self._key(resource, namespace, name))
        if obj is None:
            raise ApiError.from_status(404, {"reason": "NotFound", "message": "not found"})
        return obj

    async def delete(
        self, resource: Resource, name: str, namespace: str | None = None, **_: Any
    ) -> Any:
        key = self._key(resource, namespace, name)
        if key not in self.objects:
            raise ApiError.from_status(404, {"reason": "NotFound", "message": "not found"})
        self.writes.append(("delete", resource.kind, name))
        del self.objects[key]
        return {}

    async def merge_patch(
        self,
        resource: Resource,
        name: str,
        patch: Mapping[str, Any],
        namespace: str | None = None,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> Any:
        key = self._key(resource, namespace, name)
        patch = dict(patch)
        patch.get("metadata", {}).pop("resourceVersion", None)
        self.writes.append(
            ("patch" + (f"/{subresource}" if subresource else ""), resource.kind, name)
        )
        return self._stored(resource, key, _merge(self.objects[key], patch))

    async def json_patch(
        self,
        resource: Resource,
        name: str,
        ops: Sequence[Mapping[str, Any]],
        namespace: str | None = None,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> Any:
        key = self._key(resource, namespace, name)
        if key not in self.objects:
            raise ApiError.from_status(404, {"reason": "NotFound", "message": "not found"})
        try:
            obj = apply_json_patch(copy.deepcopy(self.objects[key]), ops)
        except PatchError as exc:
            raise ApiError.from_status(422, {"reason": "Invalid", "message": str(exc)}) from None
        self.writes.append(("patch", resource.kind, name))
        return self._stored(resource, key, obj)

    def _stored(self, resource: Resource, key: Key, obj: dict[str, Any]) -> Any:
        meta = obj["metadata"]
        if resource == KUBEVIRTS and meta.get("deletionTimestamp") and not meta.get("finalizers"):
            del self.objects[key]
            return obj
        return self.put(resource, obj)

    async def list(self, resource: Resource, namespace: str | None = None, **_: Any) -> Any:
        items = [o for (plural, _ns, _n), o in self.objects.items() if plural == resource.plural]
        return {"items": items}

    # -- cache ----------------------------------------------------------------------
    def lookup(
        self, resource: Resource, namespace: str | None, name: str
    ) -> Mapping[str, Any] | None:
        return self.objects.get(self._key(resource, namespace, name))

    def managed(self, resource: Resource) -> builtins.list[Mapping[str, Any]]:
        return [
            o
            for (plural, _ns, _n), o in self.objects.items()
            if plural == resource.plural
            and (o["metadata"].get("labels") or {}).get(MANAGED_BY_LABEL) == MANAGED_BY
        ]

    def kubevirts(self) -> builtins.list[Mapping[str, Any]]:
        return [o for (plural, _ns, _n), o in self.objects.items() if plural == "kubevirts"]

    # -- test helpers ----------------------------------------------------------------
    def obj(self, plural: str, name: str, namespace: str | None = "kubevirt") -> dict[str, Any]:
        for (p, ns, n), obj in self.objects.items():
            if p == plural and n == name and (ns is None or ns == namespace):
                return obj
        raise KeyError((plural, namespace, name))

    def has(self, plural: str, name: str) -> bool:
        return any(p == plural and n == name for (p, _ns, n) in self.objects)

    def roll_out(self, plural: str, name: str, nodes: int = 1) -> None:
        """Play the workload controllers: every pod of the current template is ready."""
        obj = self.obj(plural, name)
        generation = obj["metadata"]["generation"]
        if plural == "daemonsets":
            obj["status"] = {
                "observedGeneration": generation,
                "desiredNumberScheduled": nodes,
                "numberReady": nodes,
                "updatedNumberScheduled": nodes,
            }
        else:
            replicas = obj["spec"].get("replicas", 1)
            obj["status"] = {
                "observedGeneration": generation,
                "replicas": replicas,
                "readyReplicas": replicas,
                "updatedReplicas": replicas,
            }


def kubevirt(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "KubeVirt",
        "metadata": {"name": "kubevirt", "namespace": "kubevirt", "generation": 1},
        "spec": spec,
    }


class FakeClock:
    def __init__(self) -> None:
        self.now = datetime.datetime(2026, 12, 1, 12, 0, tzinfo=datetime.UTC)

    def __call__(self) -> datetime.datetime:
        return self.now
