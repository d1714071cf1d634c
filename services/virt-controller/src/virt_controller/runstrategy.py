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

from kubevirt_api.enums import FINAL_VMI_PHASES, RunStrategy
from kubevirt_api.enums import VirtualMachineInstancePhase as Phase

__all__ = [
    "Action",
    "Decision",
    "VmiView",
    "decide",
    "start_backoff_seconds",
]

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
        return self.phase in FINAL_VMI_PHASES


@dataclass(frozen=True, slots=True)
class Decision:
    """`action` on the VMI; `consumed` leading state change requests are done."""

    action: Action
    consumed: int = 0
    retry_after: float | None = None


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
        first = requests[0]
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
    if strategy == RunStrategy.ALWAYS:
        if vmi is None:
            return _auto_start(start_failure, now)
        return Decision(Action.DELETE) if vmi.final else Decision(Action.NONE)
    if strategy == RunStrategy.RERUN_ON_FAILURE:
        if vmi is None:
            return _auto_start(start_failure, now)
        return Decision(Action.DELETE) if vmi.phase == Phase.FAILED else Decision(Action.NONE)
    if strategy == RunStrategy.HALTED:
        return Decision(Action.DELETE) if vmi is not None else Decision(Action.NONE)
    if strategy == RunStrategy.ONCE:
        return Decision(Action.CREATE) if vmi is None else Decision(Action.NONE)
    return Decision(Action.NONE)  # Manual (and unknown strategies): requests only
