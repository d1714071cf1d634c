"""The status validator: status writes to VMs, replica sets and migrations."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..values import as_list, as_map, as_str
from .causes import Cause, CauseType, FieldPath

__all__ = ["validate_status_update"]

STATE_CHANGE_ACTIONS = ("Start", "Stop")


def validate_status_update(
    kind: str, new: Mapping[str, Any], old: Mapping[str, Any] | None
) -> list[Cause]:
    """A status write keeps the spec and carries well-formed state change requests."""
    causes: list[Cause] = []
    if old is not None and new.get("spec") != old.get("spec"):
        causes.append(
            Cause("spec", "the status subresource cannot change the spec", CauseType.FORBIDDEN)
        )
    if kind == "VirtualMachine":
        path = FieldPath("status").child("stateChangeRequests")
        requests = as_list(as_map(new.get("status")).get("stateChangeRequests"))
        if len(requests) > 2:
            causes.append(
                Cause(
                    str(path), "at most two state change requests (Stop then Start) may be pending"
                )
            )
        for i, raw in enumerate(requests):
            action = as_str(as_map(raw).get("action"))
            if action not in STATE_CHANGE_ACTIONS:
                causes.append(
                    Cause(
                        str(path.index(i).child("action")),
                        f"action '{action or ''}' is not supported; use Start or Stop",
                        CauseType.NOT_SUPPORTED,
                    )
                )
    return causes
