"""Small readers over raw (frozen) Kubernetes objects: owners, phases, conditions, times."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kube_runtime import RawObject, thaw

__all__ = [
    "condition",
    "controller_owner",
    "deleting",
    "format_time",
    "index_by_controller",
    "index_by_node",
    "key",
    "labels",
    "mapping",
    "meta",
    "owner_ref",
    "parse_time",
    "phase",
    "pod_down",
    "pod_ready",
    "same_conditions",
    "status_changes",
    "uid",
    "upsert_condition",
]


def mapping(value: object) -> Mapping[str, Any]:
    """`value` if it is a mapping, else an empty one (for defensive reads)."""
    return value if isinstance(value, Mapping) else {}


def meta(obj: RawObject) -> Mapping[str, Any]:
    """The object's metadata (empty when missing)."""
    return mapping(obj.get("metadata"))


def uid(obj: RawObject) -> str:
    """metadata.uid, or "" when unset."""
    return str(meta(obj).get("uid") or "")


def key(obj: RawObject) -> str:
    """The work-queue key: `namespace/name`, or `name` for cluster-scoped objects."""
    m = meta(obj)
    return f"{m.get('namespace')}/{m.get('name')}" if m.get("namespace") else str(m.get("name"))


def labels(obj: RawObject) -> Mapping[str, str]:
    """metadata.labels (empty when missing)."""
    return mapping(meta(obj).get("labels"))


def deleting(obj: RawObject) -> bool:
    """Whether a deletionTimestamp is set (finalizers may still hold the object)."""
    return bool(meta(obj).get("deletionTimestamp"))


def phase(obj: RawObject | None) -> str:
    """status.phase, or "" when there is no object or no phase."""
    if obj is None:
        return ""
    value = mapping(obj.get("status")).get("phase")
    return value if isinstance(value, str) else ""


def pod_down(pod: RawObject) -> bool:
    """The pod's containers have all ended (phase Succeeded or Failed)."""
    return phase(pod) in ("Succeeded", "Failed")


def pod_ready(pod: RawObject) -> bool:
    """Running and not going down, as upstream's IsPodReady: the compute container (whose
    readiness follows the guest) need only run; every other container must be ready."""
    if pod_down(pod) or deleting(pod) or phase(pod) != "Running":
        return False
    for status in mapping(pod.get("status")).get("containerStatuses") or ():
        status = mapping(status)
        state = mapping(status.get("state"))
        if status.get("name") == "compute":
            if "running" not in state:
                return False
        elif status.get("ready") is not True:
            return False
    return True


def controller_owner(obj: RawObject) -> Mapping[str, Any] | None:
    """The ownerReference with controller: true, if any (never matched by labels)."""
    for ref in meta(obj).get("ownerReferences") or ():
        ref = mapping(ref)
        if ref.get("controller") is True and ref.get("uid"):
            return ref
    return None


def index_by_controller(kind: str | None) -> Any:
    """An index function: the uid of the controlling owner (of `kind`, if given)."""

    def index(obj: RawObject) -> Iterable[str]:
        ref = controller_owner(obj)
        if ref is not None and (kind is None or ref.get("kind") == kind):
            return (str(ref["uid"]),)
        return ()

    return index


def index_by_node(obj: RawObject) -> Iterable[str]:
    """An index function: status.nodeName, when set."""
    node = mapping(obj.get("status")).get("nodeName")
    return (node,) if isinstance(node, str) and node else ()


def owner_ref(owner: RawObject, api_version: str, kind: str) -> dict[str, Any]:
    """A controller ownerReference to `owner` that blocks its foreground deletion."""
    m = meta(owner)
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": m.get("name"),
        "uid": m.get("uid"),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def condition(obj: RawObject | None, kind: str) -> Mapping[str, Any] | None:
    """The status condition of type `kind`, if present."""
    if obj is None:
        return None
    for c in mapping(obj.get("status")).get("conditions") or ():
        if mapping(c).get("type") == kind:
            return mapping(c)
    return None


def format_time(when: dt.datetime) -> str:
    """RFC 3339 in UTC to the second, as metav1.Time serialises."""
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: object) -> dt.datetime | None:
    """An RFC 3339 timestamp as the API server writes it (None when absent or malformed)."""
    if not isinstance(value, str):
        return None
    try:
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def upsert_condition(
    conditions: Sequence[Mapping[str, Any]],
    kind: str,
    status: str | None,
    now: dt.datetime,
    *,
    reason: str = "",
    message: str = "",
) -> list[dict[str, Any]]:
    """`conditions` with `kind` set (status None removes it); transition time kept if same."""
    out: list[dict[str, Any]] = []
    found = False
    for c in conditions:
        c = thaw(c)
        if c.get("type") != kind:
            out.append(c)
            continue
        found = True
        if status is None:
            continue
        new = {"type": kind, "status": status, "lastProbeTime": None}
        same = c.get("status") == status
        new["lastTransitionTime"] = c.get("lastTransitionTime") if same else format_time(now)
        if reason:
            new["reason"] = reason
        if message:
            new["message"] = message
        out.append(new)
    if not found and status is not None:
        new = {
            "type": kind,
            "status": status,
            "lastProbeTime": None,
            "lastTransitionTime": format_time(now),
        }
        if reason:
            new["reason"] = reason
        if message:
            new["message"] = message
        out.append(new)
    return out


def same_conditions(a: Sequence[Mapping[str, Any]], b: Sequence[Mapping[str, Any]]) -> bool:
    """Equal up to null fields (the API server may prune nulls it was sent)."""

    def strip(conditions: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        return [{k: v for k, v in thaw(c).items() if v is not None} for c in conditions]

    return strip(a) == strip(b)


def status_changes(obj: RawObject, wanted: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of `wanted` that differ from obj.status (a status patch; empty: no write)."""
    status = mapping(obj.get("status"))
    patch = {k: v for k, v in wanted.items() if thaw(status.get(k)) != v}
    if "conditions" in patch and same_conditions(
        status.get("conditions") or (), wanted["conditions"]
    ):
        del patch["conditions"]
    return patch
