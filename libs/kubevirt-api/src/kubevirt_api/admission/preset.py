"""VirtualMachineInstancePreset admission."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..clusterconfig import ClusterConfig
from ..values import as_map
from .causes import Cause, CauseType, FieldPath
from .compute import check_compute

__all__ = ["validate_preset"]


def validate_preset(preset: Mapping[str, Any], config: ClusterConfig) -> list[Cause]:
    """A preset needs a selector; the domain it merges obeys the compute rules."""
    path = FieldPath("spec")
    spec = as_map(preset.get("spec"))
    causes: list[Cause] = []
    if not isinstance(spec.get("selector"), Mapping):
        causes.append(
            Cause(str(path.child("selector")), "a preset needs a selector", CauseType.REQUIRED)
        )
    if "domain" in spec:
        causes.extend(check_compute({"domain": spec.get("domain")}, path, config))
    return causes
