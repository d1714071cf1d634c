"""MigrationPolicy admission."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..values import as_int, as_map
from .causes import Cause, FieldPath
from .quantity import parse_quantity

__all__ = ["validate_migration_policy"]


def validate_migration_policy(policy: Mapping[str, Any]) -> list[Cause]:
    """Bandwidth and timeouts are non-negative."""
    path = FieldPath("spec")
    spec = as_map(policy.get("spec"))
    causes: list[Cause] = []
    if "bandwidthPerMigration" in spec:
        bandwidth = parse_quantity(spec.get("bandwidthPerMigration"))
        if bandwidth is None or bandwidth < 0:
            causes.append(
                Cause(
                    str(path.child("bandwidthPerMigration")),
                    "bandwidthPerMigration must be a non-negative quantity such as 64Mi",
                )
            )
    if "completionTimeoutPerGiB" in spec:
        timeout = as_int(spec.get("completionTimeoutPerGiB"))
        if timeout is None or timeout < 0:
            causes.append(
                Cause(
                    str(path.child("completionTimeoutPerGiB")),
                    "completionTimeoutPerGiB must be an integer of at least 0",
                )
            )
    return causes
