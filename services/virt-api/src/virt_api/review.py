"""AdmissionReview v1: strict parsing of requests and building of responses.

Every field of an incoming review is checked before use; anything malformed raises
`MalformedReviewError`, which the webhook turns into a denial (or a 400 when no uid is known).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubevirt_api.admission import Cause

__all__ = [
    "API_VERSION",
    "MalformedReviewError",
    "Review",
    "UserInfo",
    "allow",
    "deny",
    "parse_review",
]

API_VERSION = "admission.k8s.io/v1"
OPERATIONS = ("CREATE", "UPDATE", "DELETE", "CONNECT")
MAX_MESSAGE = 4000


class MalformedReviewError(ValueError):
    """The body is not a usable AdmissionReview; `uid` is set when one could be read."""

    def __init__(self, message: str, uid: str | None = None) -> None:
        super().__init__(message)
        self.uid = uid


@dataclass(frozen=True, slots=True)
class UserInfo:
    """Who asked the API server for this change."""

    username: str = ""
    groups: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Review:
    """The parts of an AdmissionRequest that admission uses."""

    uid: str
    group: str
    version: str
    kind: str
    resource: str
    subresource: str
    operation: str
    namespace: str
    name: str
    object: Mapping[str, Any]
    old_object: Mapping[str, Any] | None
    user: UserInfo = field(default_factory=UserInfo)
    dry_run: bool = False


def _str(value: object, where: str, uid: str | None, *, required: bool = False) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise MalformedReviewError(f"{where} must be a string", uid)
    return value


def parse_review(body: object) -> Review:
    """Read an AdmissionReview v1 request, refusing anything off-shape."""
    if not isinstance(body, Mapping):
        raise MalformedReviewError("body must be a JSON object (an AdmissionReview)")
    if body.get("apiVersion") != API_VERSION or body.get("kind") != "AdmissionReview":
        raise MalformedReviewError(f"expected apiVersion {API_VERSION} and kind AdmissionReview")
    request = body.get("request")
    if not isinstance(request, Mapping):
        raise MalformedReviewError("request must be an object")
    raw_uid = request.get("uid")
    if not isinstance(raw_uid, str) or not raw_uid or len(raw_uid) > 128:
        raise MalformedReviewError("request.uid must be a non-empty string")
    uid = raw_uid
    kind = request.get("kind")
    if not isinstance(kind, Mapping):
        raise MalformedReviewError("request.kind must be an object", uid)
    resource = request.get("resource")
    if not isinstance(resource, Mapping):
        raise MalformedReviewError("request.resource must be an object", uid)
    operation = _str(request.get("operation"), "request.operation", uid, required=True)
    if operation not in OPERATIONS:
        raise MalformedReviewError(f"request.operation must be one of {', '.join(OPERATIONS)}", uid)
    obj = request.get("object")
    if operation in ("CREATE", "UPDATE") and not isinstance(obj, Mapping):
        raise MalformedReviewError("request.object must be an object", uid)
    old = request.get("oldObject")
    if old is not None and not isinstance(old, Mapping):
        raise MalformedReviewError("request.oldObject must be an object or null", uid)
    if operation == "UPDATE" and old is None:
        raise MalformedReviewError("request.oldObject is required for UPDATE", uid)
    user = request.get("userInfo")
    if user is not None and not isinstance(user, Mapping):
        raise MalformedReviewError("request.userInfo must be an object", uid)
    user = user or {}
    groups = user.get("groups") or []
    if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
        raise MalformedReviewError("request.userInfo.groups must be a list of strings", uid)
    dry_run = request.get("dryRun", False)
    if not isinstance(dry_run, bool) and dry_run is not None:
        raise MalformedReviewError("request.dryRun must be a boolean", uid)
    return Review(
        uid=uid,
        group=_str(kind.get("group"), "request.kind.group", uid),
        version=_str(kind.get("version"), "request.kind.version", uid),
        kind=_str(kind.get("kind"), "request.kind.kind", uid, required=True),
        resource=_str(resource.get("resource"), "request.resource.resource", uid),
        subresource=_str(request.get("subResource"), "request.subResource", uid),
        operation=operation,
        namespace=_str(request.get("namespace"), "request.namespace", uid),
        name=_str(request.get("name"), "request.name", uid),
        object=obj if isinstance(obj, Mapping) else {},
        old_object=old,
        user=UserInfo(_str(user.get("username"), "request.userInfo.username", uid), tuple(groups)),
        dry_run=bool(dry_run),
    )


def _envelope(response: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": response}


def allow(
    uid: str, patch: Sequence[Mapping[str, Any]] | None = None, warnings: Iterable[str] = ()
) -> dict[str, Any]:
    """An allowing AdmissionReview, with a JSONPatch when the object is to be changed."""
    response: dict[str, Any] = {"uid": uid, "allowed": True}
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(list(patch)).encode()).decode()
    warn = list(warnings)
    if warn:
        response["warnings"] = warn
    return _envelope(response)


def deny(
    uid: str, causes: Sequence[Cause], *, code: int = 422, reason: str = "Invalid"
) -> dict[str, Any]:
    """A denying AdmissionReview whose message lists every cause with its field path."""
    message = "; ".join(str(c) for c in causes) or "denied"
    if len(message) > MAX_MESSAGE:
        message = message[: MAX_MESSAGE - 3] + "..."
    status = {
        "status": "Failure",
        "code": code,
        "reason": reason,
        "message": message,
        "details": {"causes": [c.as_status_cause() for c in causes]},
    }
    return _envelope({"uid": uid, "allowed": False, "status": status})
