"""What the launcher pod's renderers share: the error of a VMI that cannot become a pod,
and the securityContext every launcher pod container runs with."""

from __future__ import annotations

from typing import Any

from virt_domain.launcher_pod import LAUNCHER_UID

__all__ = ["RenderError", "restricted_security"]


class RenderError(ValueError):
    """The VMI cannot become a pod; `path` names the field."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


def restricted_security() -> dict[str, Any]:
    """Not root, no privilege escalation, every capability dropped (the compute container
    adds back the one it needs)."""
    return {
        "runAsUser": LAUNCHER_UID,
        "runAsGroup": LAUNCHER_UID,
        "runAsNonRoot": True,
        "allowPrivilegeEscalation": False,
        "privileged": False,
        "capabilities": {"drop": ["ALL"]},
    }
