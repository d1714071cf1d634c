"""Faults: which component to kill next (seeded), what one kill recorded, and the seam
through which kills reach the cluster."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

__all__ = ["Fault", "FaultPicker", "Injector", "Kill", "NoTargetError", "Target"]


class Target(StrEnum):
    """What the soak kills with SIGKILL, one at a time."""

    VIRT_API = "virt-api"
    VIRT_CONTROLLER = "virt-controller"  # the leader
    VIRT_HANDLER = "virt-handler"
    VIRT_LAUNCHER = "virt-launcher"
    KUBE_APISERVER = "kube-apiserver"
    ETCD = "etcd"
    KUBELET = "kubelet"


class NoTargetError(Exception):
    """Nothing of that kind to kill right now (e.g. no launcher pod runs)."""


@dataclass(frozen=True)
class Kill:
    """One SIGKILL: of what (pod or process name), which PID, and, for a launcher, the VM
    whose guest went with it."""

    target: Target
    what: str
    pid: int
    vm: str | None = None


class Injector(Protocol):
    async def kill(self, target: Target, rng: random.Random) -> Kill:
        """SIGKILL one process of `target` (chosen with `rng`); raises NoTargetError."""
        ...

    async def recover(self, kill: Kill, within: float) -> str | None:
        """Bring the component back the way the cluster would (start a host process again;
        wait for the kubelet to restart a pod's container). None once it is back; else
        why it is not, after at most `within` seconds."""
        ...


@dataclass
class Fault:
    """A kill and what followed: seconds after the kill until the component was back and
    until the VMs it hit were steady again (None: not within the timeout)."""

    kill: Kill
    at: float
    recovered_after: float | None = None
    #: Why the component did not come back, when it did not.
    not_back: str | None = None
    converged_after: float | None = None
    #: VMs steady at the kill and not churned since, still not steady at the deadline.
    unconverged: tuple[str, ...] = ()


class FaultPicker:
    """Components in a seeded random order, each once per round (a shuffled bag), so even a
    short run kills every kind of component and a long one kills each about equally."""

    def __init__(self, rng: random.Random, targets: Sequence[Target]) -> None:
        if not targets:
            raise ValueError("at least one fault target is needed")
        self.rng = rng
        self.targets = tuple(targets)
        self._bag: list[Target] = []

    def next(self) -> Target:
        if not self._bag:
            self._bag = list(self.targets)
            self.rng.shuffle(self._bag)
        return self._bag.pop()
