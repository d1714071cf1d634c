"""The reasons of the Events KubeVirt's components record (`kubectl describe` shows them).

Upstream's names: the controllers' create/delete outcomes (pkg/controller, watch/common)
and virt-handler's VMI lifecycle reasons and messages (core/v1 and virt-handler's).
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "CREATED",
    "DELETED",
    "FAILED_CREATE",
    "FAILED_DELETE",
    "MSG_CRASHED",
    "MSG_DEFINED",
    "MSG_GRACEFUL_SHUTDOWN",
    "MSG_POD_STOPPED",
    "MSG_SHUT_DOWN",
    "MSG_STARTED",
    "MSG_STOPPING",
    "SHUTTING_DOWN",
    "STARTED",
    "STOPPED",
    "SUCCESSFUL_CREATE",
    "SUCCESSFUL_DELETE",
    "SYNC_FAILED",
]

# virt-controller: a VM's VMI, a VMI's launcher pod.
SUCCESSFUL_CREATE: Final = "SuccessfulCreate"
FAILED_CREATE: Final = "FailedCreate"
SUCCESSFUL_DELETE: Final = "SuccessfulDelete"
FAILED_DELETE: Final = "FailedDelete"

# virt-handler: the guest of a VMI.
CREATED: Final = "Created"
STARTED: Final = "Started"
SHUTTING_DOWN: Final = "ShuttingDown"
STOPPED: Final = "Stopped"
DELETED: Final = "Deleted"
SYNC_FAILED: Final = "SyncFailed"

MSG_DEFINED: Final = "VirtualMachineInstance defined."
MSG_STARTED: Final = "VirtualMachineInstance started."
MSG_SHUT_DOWN: Final = "The VirtualMachineInstance was shut down."
MSG_CRASHED: Final = "The VirtualMachineInstance crashed."
# Ours: a Failed VMI whose pod was stopped (evicted, rejected, deleted) while it ran.
MSG_POD_STOPPED: Final = "The VirtualMachineInstance's pod was stopped while it ran."
MSG_STOPPING: Final = "VirtualMachineInstance stopping"
MSG_GRACEFUL_SHUTDOWN: Final = "Signaled Graceful Shutdown"
