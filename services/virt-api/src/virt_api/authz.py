"""Authorize each subresource call with a SubjectAccessReview for the forwarded user."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kube_runtime import SUBJECT_ACCESS_REVIEWS, KubeClient

from .frontproxy import Identity

__all__ = ["Decision", "ResourceAttributes", "authorize", "rbac_verb"]


@dataclass(frozen=True, slots=True)
class ResourceAttributes:
    """What is being done: the SubjectAccessReview's resourceAttributes."""

    namespace: str
    verb: str
    resource: str
    subresource: str = ""
    name: str = ""
    group: str = "subresources.kubevirt.io"
    version: str = "v1"


@dataclass(frozen=True, slots=True)
class Decision:
    """The API server's answer."""

    allowed: bool
    reason: str = ""


def rbac_verb(method: str, named: bool = True) -> str:
    """The RBAC verb for an HTTP method, as the API server derives it."""
    verbs = {"POST": "create", "PUT": "update", "PATCH": "patch"}
    upper = method.upper()
    if upper in verbs:
        return verbs[upper]
    if upper in ("GET", "HEAD"):
        return "get" if named else "list"
    if upper == "DELETE":
        return "delete" if named else "deletecollection"
    raise ValueError(f"no RBAC verb for HTTP method {method}")


async def authorize(api: KubeClient, who: Identity, what: ResourceAttributes) -> Decision:
    """Ask the API server whether `who` may do `what`."""
    attributes: dict[str, Any] = {
        "namespace": what.namespace,
        "verb": what.verb,
        "group": what.group,
        "version": what.version,
        "resource": what.resource,
    }
    if what.subresource:
        attributes["subresource"] = what.subresource
    if what.name:
        attributes["name"] = what.name
    spec: dict[str, Any] = {
        "user": who.user,
        "groups": list(who.groups),
        "resourceAttributes": attributes,
    }
    if who.extra:
        spec["extra"] = {k: list(v) for k, v in who.extra.items()}
    review = {
        "apiVersion": SUBJECT_ACCESS_REVIEWS.api_version,
        "kind": SUBJECT_ACCESS_REVIEWS.kind,
        "spec": spec,
    }
    answer = await api.create(SUBJECT_ACCESS_REVIEWS, review)
    status: Mapping[str, Any] = answer.get("status") or {} if isinstance(answer, Mapping) else {}
    return Decision(allowed=status.get("allowed") is True, reason=str(status.get("reason") or ""))
