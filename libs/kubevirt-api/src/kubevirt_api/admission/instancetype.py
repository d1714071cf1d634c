"""Instancetype and preference admission (namespaced and cluster-wide alike)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..values import as_int, as_map, as_str
from .causes import Cause, CauseType, FieldPath
from .compute import HUGEPAGE_SIZES, ONE_MEGABYTE
from .quantity import parse_quantity

__all__ = ["PREFERRED_TOPOLOGIES", "validate_instancetype", "validate_preference"]

PREFERRED_TOPOLOGIES = ("sockets", "cores", "threads", "spread", "any")
_LEGACY_TOPOLOGIES = ("preferSockets", "preferCores", "preferThreads", "preferSpread", "preferAny")


def validate_instancetype(obj: Mapping[str, Any]) -> list[Cause]:
    """An instancetype fixes a guest CPU count and guest memory."""
    path = FieldPath("spec")
    spec = as_map(obj.get("spec"))
    causes: list[Cause] = []
    cpu = as_map(spec.get("cpu"))
    guest_cpus = as_int(cpu.get("guest"))
    if guest_cpus is None or guest_cpus < 1:
        causes.append(
            Cause(
                str(path.child("cpu", "guest")),
                "cpu.guest is required: the number of vCPUs, at least 1",
                CauseType.REQUIRED,
            )
        )
    memory = as_map(spec.get("memory"))
    guest_memory = parse_quantity(memory.get("guest"))
    if guest_memory is None or guest_memory < ONE_MEGABYTE:
        causes.append(
            Cause(
                str(path.child("memory", "guest")),
                "memory.guest is required: a quantity of at least 1M such as 2Gi",
                CauseType.REQUIRED,
            )
        )
    if "hugepages" in memory:
        # v1.Hugepages names the size `pageSize` (as in a VMI's domain.memory.hugepages).
        size = as_str(as_map(memory.get("hugepages")).get("pageSize"))
        if size not in HUGEPAGE_SIZES:
            causes.append(
                Cause(
                    str(path.child("memory", "hugepages", "pageSize")),
                    f"hugepage size '{size or ''}' is not supported; use one of {', '.join(HUGEPAGE_SIZES)}",
                    CauseType.NOT_SUPPORTED,
                )
            )
    overcommit = memory.get("overcommitPercent")
    if overcommit is not None:
        value = as_int(overcommit)
        if value is None or not 0 <= value <= 100:
            causes.append(
                Cause(
                    str(path.child("memory", "overcommitPercent")),
                    "overcommitPercent must be between 0 and 100",
                )
            )
        elif value and "hugepages" in memory:
            causes.append(
                Cause(
                    str(path.child("memory", "overcommitPercent")),
                    "overcommitPercent cannot be used with hugepages",
                )
            )
    return causes


def validate_preference(obj: Mapping[str, Any]) -> list[Cause]:
    """A preference's preferred CPU topology is one upstream knows."""
    path = FieldPath("spec")
    spec = as_map(obj.get("spec"))
    causes: list[Cause] = []
    topology = as_map(spec.get("cpu")).get("preferredCPUTopology")
    if topology is not None and topology not in PREFERRED_TOPOLOGIES + _LEGACY_TOPOLOGIES:
        causes.append(
            Cause(
                str(path.child("cpu", "preferredCPUTopology")),
                f"preferredCPUTopology '{topology}' is not supported; use one of {', '.join(PREFERRED_TOPOLOGIES)}",
                CauseType.NOT_SUPPORTED,
            )
        )
    return causes
