"""A VirtualMachine's effective run strategy: ``spec.runStrategy`` or the deprecated ``running``.

The one resolution virt-api (start/stop/restart) and virt-controller (the VM controller,
printableStatus) share, as upstream's ``VirtualMachine.RunStrategy()``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .enums import RunStrategy
from .values import as_map

__all__ = ["resolve_run_strategy", "run_strategy"]


def resolve_run_strategy(run_strategy: object, running: object) -> str:
    """``run_strategy`` when set; else ``running: true`` reads as Always, anything else Halted.

    A known strategy comes back as its :class:`RunStrategy` member; an unknown string (which
    admission refuses, but an old object may hold) comes back unchanged.
    """
    if isinstance(run_strategy, str) and run_strategy:
        known = {strategy.value: strategy for strategy in RunStrategy}
        return known.get(run_strategy, run_strategy)
    return RunStrategy.ALWAYS if running is True else RunStrategy.HALTED


def run_strategy(vm: Mapping[str, Any]) -> str:
    """The effective run strategy of a VirtualMachine as a raw object (parsed JSON)."""
    spec = as_map(vm.get("spec"))
    return resolve_run_strategy(spec.get("runStrategy"), spec.get("running"))
