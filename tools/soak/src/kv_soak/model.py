"""What the soak sees of the cluster at one moment: typed views of VMs, VMIs, launcher
pods and QEMU processes, decoded once at the edge from the API's raw objects."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NewType

from kubevirt_api.migrations import MIGRATION_JOB_LABEL
from kubevirt_api.runstrategy import run_strategy

__all__ = [
    "PodView",
    "QemuView",
    "Snapshot",
    "Uid",
    "VmView",
    "VmiView",
    "pod_view",
    "vm_view",
    "vmi_view",
]

#: A Kubernetes object's metadata.uid (a VMI's identity survives no restart: a new VMI,
#: a new uid).
Uid = NewType("Uid", str)

_FINISHED_POD_PHASES = frozenset({"Succeeded", "Failed"})


@dataclass(frozen=True)
class VmView:
    name: str
    run_strategy: str
    deleting: bool = False


@dataclass(frozen=True)
class VmiView:
    name: str
    uid: Uid
    phase: str
    node: str = ""
    ready: bool = False
    paused: bool = False
    #: A migration of this VMI has started and not ended.
    migrating: bool = False
    #: When its last migration ended (epoch seconds), if one did.
    migration_ended: float | None = None
    deleting: bool = False


@dataclass(frozen=True)
class PodView:
    """A virt-launcher pod: which VMI it serves (controller ownerRef), and for which
    migration it is the target (the migration job label), if any."""

    name: str
    uid: Uid
    vmi_uid: Uid | None
    phase: str
    migration_job: str | None = None
    node: str = ""
    deleting: bool = False

    @property
    def alive(self) -> bool:
        """Not yet finished: its containers may still run (terminating pods count)."""
        return self.phase not in _FINISHED_POD_PHASES


@dataclass(frozen=True)
class QemuView:
    """A QEMU process on this host, with the pod whose cgroup holds it."""

    pid: int
    pod_uid: Uid | None
    guest: str


@dataclass(frozen=True)
class Snapshot:
    """One poll. `qemus` is None when the host was not scanned (a fake, or no access)."""

    monotonic: float
    wall: float
    vms: Mapping[str, VmView] = field(default_factory=dict)
    vmis: Mapping[str, VmiView] = field(default_factory=dict)
    pods: tuple[PodView, ...] = ()
    qemus: tuple[QemuView, ...] | None = None

    def vmi_by_uid(self) -> dict[Uid, VmiView]:
        return {vmi.uid: vmi for vmi in self.vmis.values()}


def _meta(raw: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = raw.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _epoch(stamp: object) -> float | None:
    if not isinstance(stamp, str) or not stamp:
        return None
    try:
        return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def vm_view(raw: Mapping[str, Any]) -> VmView:
    meta = _meta(raw)
    return VmView(str(meta.get("name", "")), run_strategy(raw), bool(meta.get("deletionTimestamp")))


def vmi_view(raw: Mapping[str, Any]) -> VmiView:
    meta = _meta(raw)
    status = raw.get("status") or {}
    conditions = {
        c.get("type"): c.get("status") == "True"
        for c in status.get("conditions") or []
        if isinstance(c, Mapping)
    }
    migration = status.get("migrationState") or {}
    ended = _epoch(migration.get("endTimestamp"))
    started = bool(migration.get("startTimestamp") or migration.get("targetPod"))
    migrating = bool(migration) and not migration.get("completed") and not migration.get("failed")
    return VmiView(
        name=str(meta.get("name", "")),
        uid=Uid(str(meta.get("uid", ""))),
        phase=str(status.get("phase") or ""),
        node=str(status.get("nodeName") or ""),
        ready=conditions.get("Ready", False),
        paused=conditions.get("Paused", False),
        migrating=migrating and started,
        migration_ended=ended,
        deleting=bool(meta.get("deletionTimestamp")),
    )


def pod_view(raw: Mapping[str, Any]) -> PodView:
    meta = _meta(raw)
    owner = next(
        (
            ref
            for ref in meta.get("ownerReferences") or []
            if isinstance(ref, Mapping)
            and ref.get("controller")
            and ref.get("kind") == "VirtualMachineInstance"
        ),
        None,
    )
    labels = meta.get("labels") or {}
    job = labels.get(MIGRATION_JOB_LABEL)
    return PodView(
        name=str(meta.get("name", "")),
        uid=Uid(str(meta.get("uid", ""))),
        vmi_uid=Uid(str(owner["uid"])) if owner else None,
        phase=str((raw.get("status") or {}).get("phase") or "Pending"),
        migration_job=str(job) if job else None,
        node=str((raw.get("spec") or {}).get("nodeName") or ""),
        deleting=bool(meta.get("deletionTimestamp")),
    )
