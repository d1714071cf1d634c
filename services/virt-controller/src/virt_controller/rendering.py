"""What the launcher pod's renderers share: the error of a VMI that cannot become a pod,
the check of a path taken from the VMI, and the securityContext every launcher pod
container runs with."""

from __future__ import annotations

from typing import Any

from kubevirt_api.paths import image_path_problem
from virt_domain.launcher_pod import LAUNCHER_UID

__all__ = ["RenderError", "check_image_path", "restricted_security"]


class RenderError(ValueError):
    """The VMI cannot become a pod; `path` names the field."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


def check_image_path(path: str, field: str) -> str:
    """`path` if it is an absolute, normal path to a file (kubevirt_api.paths), else
    RenderError naming `field`.
    Admission checked the same rule; checked again because these paths reach a shell."""
    problem = image_path_problem(path)
    if problem is not None:
        raise RenderError(field, f"{path!r} {problem}")
    return path


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
