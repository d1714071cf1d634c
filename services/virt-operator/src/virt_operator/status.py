"""The KubeVirt CR's status conditions, with upstream's reasons and messages (pure).

From `pkg/virt-operator/util/client.go`: each state sets Available, Progressing and
Degraded together; Created says every object exists. A condition keeps its
lastTransitionTime while its status stays the same.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from .wellknown import ConditionType, Reason

__all__ = ["Condition", "State", "conditions_for", "merge_conditions"]


class State(Enum):
    DEPLOYING = "deploying"
    UPDATING = "updating"
    READY = "ready"
    DELETING = "deleting"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class Condition:
    type: str
    status: str
    reason: str
    message: str


def _triple(
    available: bool, progressing: bool, degraded: bool, reason: Reason, message: str
) -> list[Condition]:
    def c(kind: ConditionType, value: bool) -> Condition:
        return Condition(kind.value, "True" if value else "False", reason.value, message)

    return [
        c(ConditionType.AVAILABLE, available),
        c(ConditionType.PROGRESSING, progressing),
        c(ConditionType.DEGRADED, degraded),
    ]


def conditions_for(
    state: State,
    *,
    created: bool,
    target_version: str,
    target_registry: str,
    observed_version: str = "",
    observed_registry: str = "",
    error: str = "",
) -> list[Condition]:
    """The conditions of `state`; Created=True (AllResourcesCreated) once `created`."""
    if state is State.DEPLOYING:
        message = f"Deploying version {target_version} with registry {target_registry}"
        out = _triple(False, True, False, Reason.DEPLOYING, message)
    elif state is State.UPDATING:
        message = (
            f"Transitioning from previous version {observed_version} with registry "
            f"{observed_registry} to target version {target_version} using registry "
            f"{target_registry}"
        )
        out = _triple(True, True, True, Reason.UPDATING, message)
    elif state is State.READY:
        out = _triple(True, False, False, Reason.ALL_COMPONENTS_READY, "All components are ready.")
    elif state is State.DELETING:
        out = _triple(False, False, True, Reason.DELETING, "Deletion was triggered")
    else:
        message = f"An error occurred during deployment: {error}"
        out = [
            Condition(
                ConditionType.SYNCHRONIZED.value, "False", Reason.DEPLOYMENT_FAILED.value, message
            ),
            *_triple(False, False, True, Reason.DEPLOYMENT_FAILED, message),
        ]
    if created and state is not State.DELETING:
        out.append(
            Condition(
                ConditionType.CREATED.value,
                "True",
                Reason.ALL_RESOURCES_CREATED.value,
                "All resources were created.",
            )
        )
    return out


def merge_conditions(
    existing: Sequence[object], wanted: Sequence[Condition], now: str
) -> list[dict[str, Any]]:
    """`wanted` as status entries; an entry whose status did not change keeps its times, so
    an unchanged state writes nothing. Types not in `wanted` are dropped."""
    old = {str(c.get("type")): c for c in existing if isinstance(c, Mapping)}
    out = []
    for cond in wanted:
        before = old.get(cond.type)
        same = before is not None and before.get("status") == cond.status
        transition = str(before.get("lastTransitionTime")) if same and before else now
        probe = (
            str(before.get("lastProbeTime"))
            if same
            and before
            and before.get("reason") == cond.reason
            and before.get("message") == cond.message
            else now
        )
        out.append(
            {
                "type": cond.type,
                "status": cond.status,
                "reason": cond.reason,
                "message": cond.message,
                "lastTransitionTime": transition,
                "lastProbeTime": probe,
            }
        )
    return out
