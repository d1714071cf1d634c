"""VirtualMachineInstanceMigration admission (create and update)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..values import as_map, as_str
from .causes import Cause, CauseType, FieldPath
from .guest import is_dns_subdomain

__all__ = ["validate_migration_create", "validate_migration_update"]


def validate_migration_create(migration: Mapping[str, Any]) -> list[Cause]:
    """A migration names the VMI it moves."""
    path = FieldPath("spec")
    spec = as_map(migration.get("spec"))
    name = as_str(spec.get("vmiName"))
    causes: list[Cause] = []
    if not name:
        causes.append(
            Cause(
                str(path.child("vmiName")),
                "vmiName is required: the name of the VMI to migrate",
                CauseType.REQUIRED,
            )
        )
    elif not is_dns_subdomain(name):
        causes.append(Cause(str(path.child("vmiName")), f"'{name}' is not a valid VMI name"))
    selector = spec.get("addedNodeSelector")
    if selector is not None and not all(isinstance(v, str) for v in as_map(selector).values()):
        causes.append(
            Cause(
                str(path.child("addedNodeSelector")),
                "addedNodeSelector maps label names to strings",
            )
        )
    return causes


def validate_migration_update(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[Cause]:
    """A migration's spec is fixed once created."""
    if new.get("spec") != old.get("spec"):
        return [
            Cause(
                "spec",
                "a migration's spec cannot be changed; delete it and create a new migration",
                CauseType.FORBIDDEN,
            )
        ]
    return []
