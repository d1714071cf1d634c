"""The churn: which lifecycle action to take next, on which VM (pure, seeded), and the
seam through which actions reach the cluster."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from kubevirt_api.enums import RunStrategy
from kubevirt_api.enums import VirtualMachineInstancePhase as Phase

from kv_soak.invariants import should_run
from kv_soak.model import Snapshot

__all__ = [
    "DEFAULT_WEIGHTS",
    "VIRT_API_ACTIONS",
    "VMI_ACTIONS",
    "Action",
    "ActionError",
    "ChurnScheduler",
    "Pick",
    "VmActions",
    "possible_actions",
]


class Action(StrEnum):
    CREATE = "create"
    DELETE = "delete"
    START = "start"
    STOP = "stop"
    RESTART = "restart"
    PAUSE = "pause"
    UNPAUSE = "unpause"
    MIGRATE = "migrate"


#: The actions virt-api serves (subresources.kubevirt.io); the VMI's or else the VM's.
VIRT_API_ACTIONS = frozenset(
    {Action.START, Action.STOP, Action.RESTART, Action.MIGRATE, Action.PAUSE, Action.UNPAUSE}
)
VMI_ACTIONS = frozenset({Action.PAUSE, Action.UNPAUSE})

#: How often each action is drawn among those possible; unpause is likely so that few
#: guests stay paused for long.
DEFAULT_WEIGHTS: Mapping[Action, float] = {
    Action.CREATE: 1.0,
    Action.DELETE: 0.5,
    Action.START: 1.0,
    Action.STOP: 1.0,
    Action.RESTART: 1.0,
    Action.PAUSE: 1.0,
    Action.UNPAUSE: 3.0,
    Action.MIGRATE: 1.0,
}


class ActionError(Exception):
    """An action the cluster refused or could not take; `status` is the HTTP status."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class VmActions(Protocol):
    """Lifecycle actions on the soak's VMs (the real one calls the API and virt-api)."""

    async def act(self, name: str, action: Action, run_strategy: str) -> None:
        """Take `action` on VM `name`; `run_strategy` is for a create. Raises ActionError."""
        ...


def possible_actions(snapshot: Snapshot, name: str, *, migrations: bool) -> tuple[Action, ...]:
    """What may be done to VM `name` now: nothing while it is on its way somewhere."""
    vm = snapshot.vms.get(name)
    vmi = snapshot.vmis.get(name)
    if vm is None:
        return (Action.CREATE,) if vmi is None else ()
    if vm.deleting:
        return ()
    if vm.run_strategy == RunStrategy.HALTED:
        return (Action.START, Action.DELETE) if vmi is None else ()
    if not should_run(vm.run_strategy):
        return ()
    if vmi is None or vmi.phase != Phase.RUNNING or vmi.deleting or vmi.migrating:
        return ()
    if vmi.paused:
        return (Action.UNPAUSE,)
    if not vmi.ready:
        return ()
    running = (Action.STOP, Action.RESTART, Action.DELETE, Action.PAUSE)
    return (*running, Action.MIGRATE) if migrations else running


@dataclass(frozen=True)
class Pick:
    name: str
    action: Action
    run_strategy: str = RunStrategy.ALWAYS


class ChurnScheduler:
    """Draws the next (VM, action) with a seeded random generator: among VMs left alone for
    at least `settle` seconds, weighted by action. Deterministic for a seed and the same
    snapshots, so a run can be replayed."""

    def __init__(
        self,
        rng: random.Random,
        names: Sequence[str],
        *,
        settle: float,
        migrations: bool,
        weights: Mapping[Action, float] = DEFAULT_WEIGHTS,
    ) -> None:
        self.rng = rng
        self.names = tuple(names)
        self.settle = settle
        self.migrations = migrations
        self.weights = weights
        self.last_touched: dict[str, float] = {}

    def pick(self, snapshot: Snapshot, now: float) -> Pick | None:
        """The next action, or None when no VM may be touched now."""
        choices: list[tuple[str, Action]] = []
        for name in self.names:
            if now - self.last_touched.get(name, float("-inf")) < self.settle:
                continue
            for action in possible_actions(snapshot, name, migrations=self.migrations):
                if self.weights.get(action, 0.0) > 0:
                    choices.append((name, action))
        if not choices:
            return None
        name, action = self.rng.choices(
            choices, weights=[self.weights[a] for _, a in choices], k=1
        )[0]
        strategy = RunStrategy.ALWAYS
        if action is Action.CREATE and self.rng.random() < 0.25:
            strategy = RunStrategy.RERUN_ON_FAILURE
        return Pick(name, action, strategy)

    def touched(self, name: str, now: float) -> None:
        """Remember that `name` was acted on (by the churn or by a fault) at `now`."""
        self.last_touched[name] = now

    def touched_since(self, name: str, since: float) -> bool:
        return self.last_touched.get(name, float("-inf")) >= since
