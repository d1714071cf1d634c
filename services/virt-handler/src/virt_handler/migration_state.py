"""A VMI's `status.migrationState` as both handlers read and write it. Pure.

virt-controller hands a migration off by writing `migrationState` {migrationUid,
sourceNode, targetNode, sourcePod, targetPod, migrationConfiguration, ...} and the label
`kubevirt.io/migrationTargetNodeName=<target>`; from then on the target handler writes
what it prepared and saw (address, ports, domain detected/ready, completion) and the
source handler what its launcher's migration job reports (start, failure, abort, mode).
The launcher's record of the job arrives as `Domain.migration` (`MigrationView` here).
Pure, but for `patch_vmi`, the one way both sides write.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kube_runtime import VIRTUAL_MACHINE_INSTANCES, ApiError, KubeClient
from kubevirt_api.migrations import MIGRATION_TARGET_NODE_LABEL
from virt_rpc import MigrationAbortStatus, MigrationMetadata, MigrationMode

__all__ = [
    "ABORTED_REASON",
    "MIGRATION_TARGET_LABEL",
    "MIGRATION_TRANSPORT_UNIX",
    "NODE_NAME_LABEL",
    "MigrationView",
    "is_done",
    "migration_state",
    "patch_vmi",
    "rfc3339",
    "state_changes",
]

NODE_NAME_LABEL = "kubevirt.io/nodeName"
#: kubevirt_api.migrations' name for it: the target node of a handed-off migration.
MIGRATION_TARGET_LABEL = MIGRATION_TARGET_NODE_LABEL
#: status.migrationTransport once a VMI moved through the unix-socket proxies.
MIGRATION_TRANSPORT_UNIX = "Unix"
#: upstream's failureReason of an aborted migration (the launcher writes it).
ABORTED_REASON = "Live migration has been aborted"

_ABORT = {
    MigrationAbortStatus.IN_PROGRESS: "Aborting",
    MigrationAbortStatus.SUCCEEDED: "Succeeded",
    MigrationAbortStatus.FAILED: "Failed",
}
_MODE = {
    MigrationMode.PRE_COPY: "PreCopy",
    MigrationMode.POST_COPY: "PostCopy",
    MigrationMode.PAUSED: "Paused",
}


def rfc3339(when: dt.datetime) -> str:
    """A Kubernetes timestamp (UTC, seconds)."""
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class MigrationView:
    """The launcher's record of a migration job (upstream's `kubevirt.migration` metadata),
    in migrationState's words: timestamps as RFC 3339, abortStatus and mode as upstream's
    strings ("" when unset)."""

    uid: str
    start_timestamp: str = ""
    end_timestamp: str = ""
    failed: bool = False
    failure_reason: str = ""
    abort_status: str = ""
    mode: str = ""
    completed: bool = False

    @classmethod
    def from_wire(cls, meta: MigrationMetadata | None) -> MigrationView | None:
        """None when the domain never took part in a migration."""
        if meta is None or not meta.uid:
            return None
        return cls(
            uid=meta.uid,
            start_timestamp=rfc3339(meta.start_timestamp) if meta.start_timestamp else "",
            end_timestamp=rfc3339(meta.end_timestamp) if meta.end_timestamp else "",
            failed=meta.failed,
            failure_reason=meta.failure_reason,
            abort_status=_ABORT.get(meta.abort_status, ""),
            mode=_MODE.get(meta.mode, ""),
            completed=meta.completed,
        )


def migration_state(vmi: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """`status.migrationState` of a raw VMI, None when there is none."""
    status = vmi.get("status")
    state = status.get("migrationState") if isinstance(status, Mapping) else None
    return state if isinstance(state, Mapping) and state else None


def is_done(state: Mapping[str, Any] | None) -> bool:
    """Upstream's `isMigrationDone`: no migration, or one that ended either way."""
    return state is None or bool(
        state.get("endTimestamp") and (state.get("completed") or state.get("failed"))
    )


def state_changes(state: Mapping[str, Any], wanted: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of `wanted` that differ from `state` (a merge patch of migrationState)."""
    return {k: v for k, v in wanted.items() if state.get(k) != v}


async def patch_vmi(client: KubeClient, vmi: Mapping[str, Any], body: Mapping[str, Any]) -> bool:
    """Merge-patch `body` into the VMI; False when it is gone.

    Only fields one side of a migration writes, so no resourceVersion guard: the sync
    loop's own status patch in the same pass does not conflict with it.
    """
    meta = vmi.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    try:
        await client.merge_patch(
            VIRTUAL_MACHINE_INSTANCES, str(meta.get("name")), body, str(meta.get("namespace"))
        )
    except ApiError as error:
        if error.status == 404:
            return False
        raise
    return True
