"""The local apiserver's audit log of writes to KubeVirt objects and pods.

Only writes are recorded (create, update, patch, delete), at RequestResponse level, so a
benchmark can say which client wrote what to which object, and whether a write changed
anything: a patch that changes nothing leaves the object's resourceVersion as it was.
Events, leases, nodes and every read are left out; the log rotates at 50 MB.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["AUDIT_MAX_MB", "AuditedWrite", "audit_policy", "read_audited_writes"]

#: Rotation size of the audit log, and how many rotated files are kept.
AUDIT_MAX_MB = 50
AUDIT_MAX_BACKUPS = 2

_WRITES = ["create", "update", "patch", "delete"]


def audit_policy() -> dict[str, Any]:
    """The audit.k8s.io/v1 Policy: writes to kubevirt.io groups and pods, nothing else."""
    return {
        "apiVersion": "audit.k8s.io/v1",
        "kind": "Policy",
        "omitStages": ["RequestReceived", "ResponseStarted"],
        "omitManagedFields": True,
        "rules": [
            {
                "level": "RequestResponse",
                "verbs": _WRITES,
                "resources": [
                    {"group": "", "resources": ["pods", "pods/status", "pods/binding"]},
                    {"group": "kubevirt.io"},
                    {"group": "snapshot.kubevirt.io"},
                    {"group": "export.kubevirt.io"},
                ],
            },
            {"level": "None"},
        ],
    }


@dataclass(frozen=True)
class AuditedWrite:
    """One completed write, as the apiserver recorded it."""

    user: str
    verb: str
    resource: str  # e.g. "pods/status"
    namespace: str
    name: str
    code: int
    #: The object's resourceVersion after the write ("" when the response carries none).
    resource_version: str
    #: The resourceVersion the request was guarded by ("" when unguarded).
    guarded_by: str
    #: When the apiserver completed it (RFC 3339, microseconds, UTC).
    stamp: str
    #: The object's status.phase after the write ("" when the response carries none).
    phase: str = ""

    @property
    def epoch(self) -> float:
        """`stamp` as seconds since the epoch (0.0 when absent)."""
        if not self.stamp:
            return 0.0
        return dt.datetime.fromisoformat(self.stamp.replace("Z", "+00:00")).timestamp()

    @property
    def changed_nothing(self) -> bool:
        """A successful guarded write that left the object's version as it was."""
        return (
            self.code < 300 and bool(self.guarded_by) and (self.resource_version == self.guarded_by)
        )


def _write(event: dict[str, Any]) -> AuditedWrite | None:
    ref = event.get("objectRef")
    if not isinstance(ref, dict) or event.get("stage") != "ResponseComplete":
        return None
    resource = str(ref.get("resource") or "")
    if ref.get("subresource"):
        resource += f"/{ref['subresource']}"
    response = event.get("responseObject")
    request = event.get("requestObject")
    rv = phase = ""
    if isinstance(response, dict):
        rv = str((response.get("metadata") or {}).get("resourceVersion") or "")
        status = response.get("status")
        if isinstance(status, dict):
            phase = str(status.get("phase") or "")
    guarded = ""
    if isinstance(request, dict):
        guarded = str((request.get("metadata") or {}).get("resourceVersion") or "")
    name = str(ref.get("name") or "")
    if not name and isinstance(response, dict):
        name = str((response.get("metadata") or {}).get("name") or "")
    return AuditedWrite(
        user=str((event.get("user") or {}).get("username") or ""),
        verb=str(event.get("verb") or ""),
        resource=resource,
        namespace=str(ref.get("namespace") or ""),
        name=name,
        code=int((event.get("responseStatus") or {}).get("code") or 0),
        resource_version=rv,
        guarded_by=guarded,
        stamp=str(event.get("stageTimestamp") or ""),
        phase=phase,
    )


def read_audited_writes(path: Path, offset: int = 0) -> tuple[list[AuditedWrite], int]:
    """The writes recorded in `path` from byte `offset` on, and the offset to read on from
    (a torn last line is left for the next read)."""
    writes: list[AuditedWrite] = []
    try:
        with path.open("rb") as log:
            log.seek(offset)
            data = log.read()
    except FileNotFoundError:
        return [], offset
    end = data.rfind(b"\n") + 1
    for line in _lines(data[:end]):
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict):
            found = _write(event)
            if found is not None:
                writes.append(found)
    return writes, offset + end


def _lines(data: bytes) -> Iterator[bytes]:
    for line in data.splitlines():
        if line.strip():
            yield line
