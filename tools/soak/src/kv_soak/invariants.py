"""The soak's invariants, as pure checks of one Snapshot.

Each check returns the Violations it finds (empty: held). They run on every poll while
the soak churns and injects faults (duplicates), and once more at the end (lost VMs,
VMIs stuck in a phase that is not final).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kubevirt_api.enums import RunStrategy
from kubevirt_api.enums import VirtualMachineInstancePhase as Phase

from kv_soak.model import Snapshot, Uid, VmiView

__all__ = [
    "DUPLICATE_LAUNCHERS",
    "DUPLICATE_QEMUS",
    "LOST_VMS",
    "MIGRATION_QEMU_GRACE",
    "RUNNING_STRATEGIES",
    "STUCK_VMIS",
    "Debounce",
    "Violation",
    "duplicate_launchers",
    "duplicate_qemus",
    "lost_vms",
    "should_run",
    "steady",
    "stuck_vmis",
    "unsettled",
]

DUPLICATE_LAUNCHERS = "duplicate launcher pods"
DUPLICATE_QEMUS = "duplicate QEMU processes"
LOST_VMS = "VMs lost"
STUCK_VMIS = "VMIs stuck in a non-final phase"

#: The strategies under which a VM must end with a running guest.
RUNNING_STRATEGIES = frozenset({RunStrategy.ALWAYS, RunStrategy.RERUN_ON_FAILURE})
#: Phases a VMI passes through on its way to Running or to an end.
_TRANSIENT = frozenset({Phase.UNSET, Phase.PENDING, Phase.SCHEDULING, Phase.SCHEDULED})
#: After a migration ends the source QEMU (paused, handed over) may take this long to go.
MIGRATION_QEMU_GRACE = 90.0


@dataclass(frozen=True, order=True)
class Violation:
    """One broken invariant: which, about what (a VM or VMI name), and what was seen."""

    invariant: str
    subject: str
    detail: str


def duplicate_launchers(snapshot: Snapshot) -> list[Violation]:
    """Two live launcher pods for one VMI in the same role.

    A VMI has one launcher pod, plus one target pod per migration (the migration job
    label tells them apart); a pod still terminating counts, since its QEMU may still run.
    """
    names = {vmi.uid: vmi.name for vmi in snapshot.vmis.values()}
    roles: dict[tuple[Uid, str], list[str]] = defaultdict(list)
    per_vmi: dict[Uid, list[str]] = defaultdict(list)
    for pod in snapshot.pods:
        if pod.vmi_uid is None or not pod.alive:
            continue
        roles[(pod.vmi_uid, pod.migration_job or "")].append(pod.name)
        per_vmi[pod.vmi_uid].append(pod.name)
    found: list[Violation] = []
    for (uid, job), pods in sorted(roles.items()):
        if len(pods) > 1:
            role = f"migration {job} target" if job else "launcher"
            found.append(
                Violation(
                    DUPLICATE_LAUNCHERS,
                    names.get(uid, uid),
                    f"{len(pods)} live {role} pods for VMI uid {uid}: {', '.join(sorted(pods))}",
                )
            )
    for uid, pods in sorted(per_vmi.items()):
        if len(pods) > 2:  # a source and one target at most
            found.append(
                Violation(
                    DUPLICATE_LAUNCHERS,
                    names.get(uid, uid),
                    f"{len(pods)} live launcher pods for VMI uid {uid}: {', '.join(sorted(pods))}",
                )
            )
    return sorted(set(found))


def _qemus_allowed(vmi: VmiView | None, wall: float) -> int:
    if vmi is None:
        return 1
    if vmi.migrating:
        return 2
    if vmi.migration_ended is not None and wall - vmi.migration_ended < MIGRATION_QEMU_GRACE:
        return 2
    return 1


def duplicate_qemus(snapshot: Snapshot) -> list[Violation]:
    """More QEMU processes for one VMI than it may have: one, or two while it migrates
    (and shortly after, while the source's hands over). Attributed through the pod whose
    cgroup holds each QEMU; one pod never holds two."""
    if snapshot.qemus is None:
        return []
    pod_vmi = {pod.uid: pod.vmi_uid for pod in snapshot.pods}
    vmis = snapshot.vmi_by_uid()
    per_pod: Counter[Uid] = Counter()
    per_vmi: dict[Uid, list[int]] = defaultdict(list)
    for qemu in snapshot.qemus:
        if qemu.pod_uid is None:
            continue
        per_pod[qemu.pod_uid] += 1
        vmi_uid = pod_vmi.get(qemu.pod_uid)
        if vmi_uid is not None:
            per_vmi[vmi_uid].append(qemu.pid)
    found: list[Violation] = []
    for pod_uid, count in sorted(per_pod.items()):
        if count > 1:
            found.append(Violation(DUPLICATE_QEMUS, pod_uid, f"{count} QEMUs in pod {pod_uid}"))
    for vmi_uid, pids in sorted(per_vmi.items()):
        vmi = vmis.get(vmi_uid)
        if len(pids) > _qemus_allowed(vmi, snapshot.wall):
            found.append(
                Violation(
                    DUPLICATE_QEMUS,
                    vmi.name if vmi else vmi_uid,
                    f"{len(pids)} QEMUs (pids {', '.join(map(str, sorted(pids)))}) for VMI "
                    f"uid {vmi_uid}" + (" (not migrating)" if vmi and not vmi.migrating else ""),
                )
            )
    return found


def should_run(strategy: str) -> bool:
    return strategy in RUNNING_STRATEGIES


def steady(snapshot: Snapshot, name: str) -> bool:
    """The VM is where its run strategy wants it: a Ready, Running, not migrating VMI when
    it should run; no VMI when halted; gone when deleted."""
    vm = snapshot.vms.get(name)
    vmi = snapshot.vmis.get(name)
    if vm is None:
        return vmi is None
    if vm.deleting:
        return False
    if should_run(vm.run_strategy):
        return (
            vmi is not None
            and vmi.phase == Phase.RUNNING
            and (vmi.ready or vmi.paused)
            and not vmi.migrating
            and not vmi.deleting
        )
    if vm.run_strategy == RunStrategy.HALTED:
        return vmi is None
    return vmi is None or vmi.phase not in _TRANSIENT


def unsettled(snapshot: Snapshot, names: Iterable[str] | None = None) -> list[str]:
    """The VMs (all the snapshot knows, or `names`) that are not steady."""
    wanted = set(snapshot.vms) | set(snapshot.vmis) if names is None else set(names)
    return sorted(name for name in wanted if not steady(snapshot, name))


def stuck_vmis(snapshot: Snapshot) -> list[Violation]:
    """VMIs in a phase on the way somewhere (Pending, Scheduling, Scheduled, unset), or
    being deleted: after the faults stopped and the settle time passed, none may be."""
    return [
        Violation(
            STUCK_VMIS,
            vmi.name,
            "deleting" if vmi.deleting else f"phase {vmi.phase or '(unset)'}",
        )
        for vmi in sorted(snapshot.vmis.values(), key=lambda v: v.name)
        if vmi.phase in _TRANSIENT or vmi.deleting
    ]


def lost_vms(snapshot: Snapshot, answers: Mapping[str, bool]) -> list[Violation]:
    """VMs that should run but do not end with a Running VMI whose guest answered on its
    console (`answers`: the console probe's verdict per VM name)."""
    found = []
    for name, vm in sorted(snapshot.vms.items()):
        if not should_run(vm.run_strategy):
            continue
        vmi = snapshot.vmis.get(name)
        if vmi is None:
            found.append(Violation(LOST_VMS, name, f"runStrategy {vm.run_strategy}, no VMI"))
        elif vmi.phase != Phase.RUNNING:
            found.append(Violation(LOST_VMS, name, f"VMI phase {vmi.phase or '(unset)'}"))
        elif not answers.get(name, False):
            found.append(Violation(LOST_VMS, name, "the guest did not answer on its console"))
    return found


class Debounce:
    """Passes a violation on only once it is seen in two polls in a row: the pod list and
    the host's processes are read a few milliseconds apart, so one poll can catch a
    hand-over half done."""

    def __init__(self) -> None:
        self._last: set[tuple[str, str]] = set()

    def __call__(self, found: Iterable[Violation]) -> list[Violation]:
        found = list(found)
        keys = {(v.invariant, v.subject) for v in found}
        confirmed = [v for v in found if (v.invariant, v.subject) in self._last]
        self._last = keys
        return confirmed
