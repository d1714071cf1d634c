"""Upstream's readiness of the components (`pkg/virt-operator/util/readycheck.go`), pure.

A Deployment is ready with at least one ready pod of the target install; a DaemonSet when
every scheduled pod is ready and updated (so with no nodes it never is, as upstream).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["daemonset_ready", "deployment_ready", "is_target", "why_not_ready"]


def is_target(obj: Mapping[str, Any] | None, stamp: Mapping[str, str]) -> bool:
    """True when `obj`'s pod template carries the target install's annotations."""
    if obj is None:
        return False
    template = ((obj.get("spec") or {}).get("template") or {}).get("metadata") or {}
    annotations = template.get("annotations") or {}
    return all(annotations.get(k) == v for k, v in stamp.items())


def _observed(obj: Mapping[str, Any]) -> bool:
    meta, status = obj.get("metadata") or {}, obj.get("status") or {}
    return int(status.get("observedGeneration") or 0) >= int(meta.get("generation") or 1)


def why_not_ready(obj: Mapping[str, Any] | None, stamp: Mapping[str, str]) -> str:
    """ "" when the Deployment or DaemonSet is ready at the target install, else why not."""
    if obj is None:
        return "absent"
    if not is_target(obj, stamp):
        return "not yet at the target install"
    if not _observed(obj):
        return "update not yet observed"
    status = obj.get("status") or {}
    if obj.get("kind") == "DaemonSet":
        want = int(status.get("desiredNumberScheduled") or 0)
        ready = int(status.get("numberReady") or 0)
        updated = int(status.get("updatedNumberScheduled") or 0)
        if want == 0:
            return "no node to run on"
        if ready == want and updated >= want:
            return ""
        return f"{ready}/{want} ready, {updated} updated"
    ready = int(status.get("readyReplicas") or 0)
    updated = int(status.get("updatedReplicas") or 0)
    if ready >= 1 and updated >= 1:
        return ""
    return f"{ready} ready, {updated} updated"


def deployment_ready(obj: Mapping[str, Any] | None, stamp: Mapping[str, str]) -> bool:
    return why_not_ready(obj, stamp) == ""


daemonset_ready = deployment_ready
