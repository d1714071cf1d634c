"""What the VM controller does about a VM's VMI: start, stop, or wait (pure decisions).

Upstream's semantics: Always keeps a VMI running (a finished one is replaced), RerunOnFailure
replaces only a Failed one, Halted keeps none, Manual and Once act only on state change
requests (Once starts a single time), and the deprecated `running` means Always/Halted.
State change requests from virt-api (`Stop` with the VMI's uid, `Start`) come first.
"""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "FINAL_PHASES",
    "Action",
    "Decision",
    "VmiView",
    "decide",
    "run_strategy",
    "start_backoff_seconds",
]

FINAL_PHASES = frozenset({"Succeeded", "Failed"})
MIN_BACKOFF = 10.0
MAX_BACKOFF = 300.0


class Action(enum.Enum):
    NONE = "none"
    CREATE = "create"
    DELETE = "delete"
    WAIT_BACKOFF = "wait-backoff"


@dataclass(frozen=True, slots=True)
class VmiView:
    """The facts about the VM's VMI that decisions need."""

    uid: str
    phase: str
    deleting: bool

    @property
    def final(self) -> bool:
        return self.phase in FINAL_PHASES


@dataclass(frozen=True, slots=True)
class Decision:
    """`action` on the VMI; `consumed` leading state change requests are done."""

    action: Action
    consumed: int = 0
    retry_after: float | None = None


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def run_strategy(vm: Mapping[str, Any]) -> str:
    """spec.runStrategy, else Always/Halted from the deprecated spec.running."""
    spec = _map(vm.get("spec"))
    strategy = spec.get("runStrategy")
    if isinstance(strategy, str) and strategy:
        return strategy
    return "Always" if spec.get("running") is True else "Halted"


def start_backoff_seconds(consecutive_failures: int) -> float:
    """Delay before restarting after `n` failed starts: 10s doubling up to 5 minutes."""
    if consecutive_failures < 1:
        return 0.0
    return float(min(MAX_BACKOFF, MIN_BACKOFF * 2.0 ** (consecutive_failures - 1)))


def _parse_time(value: object) -> dt.datetime | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


def _auto_start(start_failure: Mapping[str, Any], now: dt.datetime) -> Decision:
    retry_at = _parse_time(start_failure.get("retryAfterTimestamp"))
    if retry_at is not None and retry_at > now:
        return Decision(Action.WAIT_BACKOFF, retry_after=(retry_at - now).total_seconds())
    return Decision(Action.CREATE)


def decide(
    strategy: str,
    vmi: VmiView | None,
    requests: Sequence[Mapping[str, Any]],
    start_failure: Mapping[str, Any],
    now: dt.datetime,
) -> Decision:
    """The next step for a VM; called again after each step has been observed."""
    if vmi is not None and vmi.deleting:
        return Decision(Action.NONE)  # wait until it is gone
    if requests:
        first = _map(requests[0])
        if first.get("action") == "Stop":
            wanted = first.get("uid")
            if vmi is not None and wanted in (None, "", vmi.uid):
                return Decision(Action.DELETE)
            return Decision(Action.NONE, consumed=1)
        if first.get("action") == "Start":
            if vmi is None:
                return Decision(Action.CREATE, consumed=1)
            if vmi.final:
                return Decision(Action.DELETE)
            return Decision(Action.NONE, consumed=1)
        return Decision(Action.NONE, consumed=1)  # unknown action: drop it
    if strategy == "Always":
        if vmi is None:
            return _auto_start(start_failure, now)
        return Decision(Action.DELETE) if vmi.final else Decision(Action.NONE)
    if strategy == "RerunOnFailure":
        if vmi is None:
            return _auto_start(start_failure, now)
        return Decision(Action.DELETE) if vmi.phase == "Failed" else Decision(Action.NONE)
    if strategy == "Halted":
        return Decision(Action.DELETE) if vmi is not None else Decision(Action.NONE)
    if strategy == "Once":
        return Decision(Action.CREATE) if vmi is None else Decision(Action.NONE)
    return Decision(Action.NONE)  # Manual (and unknown strategies): requests only
