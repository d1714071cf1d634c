"""The invariant checkers find what they must, and nothing that a migration or a
finished pod explains."""

from __future__ import annotations

from kv_soak.invariants import (
    DUPLICATE_LAUNCHERS,
    DUPLICATE_QEMUS,
    LOST_VMS,
    STUCK_VMIS,
    Debounce,
    Violation,
    duplicate_launchers,
    duplicate_qemus,
    lost_vms,
    steady,
    stuck_vmis,
    unsettled,
)
from kv_soak.model import PodView, QemuView, Snapshot, Uid, VmiView, VmView

NOW = 1_000_000.0


def vmi(name: str, uid: str, phase: str = "Running", **kw: object) -> VmiView:
    return VmiView(name, Uid(uid), phase, ready=phase == "Running", **kw)  # type: ignore[arg-type]


def pod(name: str, vmi_uid: str, phase: str = "Running", job: str | None = None) -> PodView:
    return PodView(name, Uid(f"pod-{name}"), Uid(vmi_uid), phase, migration_job=job)


def snap(vmis: list[VmiView] = [], pods: list[PodView] = [], **kw: object) -> Snapshot:  # noqa: B006
    return Snapshot(0.0, NOW, vmis={v.name: v for v in vmis}, pods=tuple(pods), **kw)  # type: ignore[arg-type]


def test_two_launcher_pods_for_one_vmi_are_reported() -> None:
    found = duplicate_launchers(
        snap([vmi("a", "u1")], [pod("virt-launcher-a-1", "u1"), pod("virt-launcher-a-2", "u1")])
    )
    assert [(v.invariant, v.subject) for v in found] == [(DUPLICATE_LAUNCHERS, "a")]
    assert "virt-launcher-a-1, virt-launcher-a-2" in found[0].detail


def test_a_migration_target_and_finished_pods_are_not_duplicates() -> None:
    pods = [
        pod("src", "u1"),
        pod("target", "u1", job="m1"),
        pod("old", "u1", phase="Succeeded"),
        pod("other", "u2"),
    ]
    assert duplicate_launchers(snap([vmi("a", "u1"), vmi("b", "u2")], pods)) == []


def test_two_targets_of_one_migration_and_three_live_pods_are_reported() -> None:
    pods = [pod("src", "u1"), pod("t1", "u1", job="m1"), pod("t2", "u1", job="m1")]
    found = duplicate_launchers(snap([vmi("a", "u1")], pods))
    details = " | ".join(v.detail for v in found)
    assert "2 live migration m1 target pods" in details
    assert "3 live launcher pods" in details


def _qemus(*pairs: tuple[int, str]) -> tuple[QemuView, ...]:
    return tuple(QemuView(pid, Uid(f"pod-{pod_name}"), "ns_a") for pid, pod_name in pairs)


def test_two_qemus_for_a_vmi_that_does_not_migrate_are_reported() -> None:
    snapshot = snap(
        [vmi("a", "u1")],
        [pod("p1", "u1"), pod("p2", "u1", job="m1")],
        qemus=_qemus((11, "p1"), (12, "p2")),
    )
    found = duplicate_qemus(snapshot)
    assert [(v.invariant, v.subject) for v in found] == [(DUPLICATE_QEMUS, "a")]
    assert "pids 11, 12" in found[0].detail


def test_two_qemus_while_migrating_or_just_after_are_allowed() -> None:
    pods = [pod("p1", "u1"), pod("p2", "u1", job="m1")]
    qemus = _qemus((11, "p1"), (12, "p2"))
    assert duplicate_qemus(snap([vmi("a", "u1", migrating=True)], pods, qemus=qemus)) == []
    just = vmi("a", "u1", migration_ended=NOW - 10)
    assert duplicate_qemus(snap([just], pods, qemus=qemus)) == []
    long_ago = vmi("a", "u1", migration_ended=NOW - 600)
    assert duplicate_qemus(snap([long_ago], pods, qemus=qemus)) != []


def test_two_qemus_in_one_pod_are_reported_and_unknown_pods_ignored() -> None:
    snapshot = snap(
        [vmi("a", "u1")],
        [pod("p1", "u1")],
        qemus=(
            *_qemus((11, "p1"), (12, "p1")),
            QemuView(13, None, "x"),
            QemuView(14, Uid("?"), "y"),
        ),
    )
    subjects = {v.subject for v in duplicate_qemus(snapshot)}
    assert subjects == {"pod-p1", "a"}


def test_no_host_scan_means_no_qemu_verdict() -> None:
    assert duplicate_qemus(snap([vmi("a", "u1")], [pod("p1", "u1")], qemus=None)) == []


def test_debounce_passes_only_what_is_seen_twice_in_a_row() -> None:
    debounce = Debounce()
    one = Violation(DUPLICATE_QEMUS, "a", "x")
    two = Violation(DUPLICATE_QEMUS, "b", "y")
    assert debounce([one]) == []
    assert debounce([one, two]) == [one]
    assert debounce([two]) == [two]
    assert debounce([one]) == []


def test_steady_follows_the_run_strategy() -> None:
    running = snap([vmi("a", "u1")], vms={"a": VmView("a", "Always")})
    assert steady(running, "a")
    halted_with_vmi = snap([vmi("a", "u1")], vms={"a": VmView("a", "Halted")})
    assert not steady(halted_with_vmi, "a")
    assert steady(snap(vms={"a": VmView("a", "Halted")}), "a")
    starting = snap([vmi("a", "u1", "Scheduling")], vms={"a": VmView("a", "Always")})
    assert not steady(starting, "a")
    migrating = snap([vmi("a", "u1", migrating=True)], vms={"a": VmView("a", "Always")})
    assert not steady(migrating, "a")
    assert steady(snap(), "gone")
    assert unsettled(starting) == ["a"]


def test_stuck_vmis_are_those_on_their_way_or_being_deleted() -> None:
    found = stuck_vmis(
        snap(
            [
                vmi("a", "u1", "Scheduled"),
                vmi("b", "u2", "Running"),
                vmi("c", "u3", "Failed"),
                vmi("d", "u4", "Running", deleting=True),
                vmi("e", "u5", ""),
            ]
        )
    )
    assert [(v.invariant, v.subject) for v in found] == [
        (STUCK_VMIS, "a"),
        (STUCK_VMIS, "d"),
        (STUCK_VMIS, "e"),
    ]


def test_a_vm_that_should_run_is_lost_without_a_running_answering_guest() -> None:
    snapshot = snap(
        [vmi("ok", "u1"), vmi("mute", "u2"), vmi("failed", "u3", "Failed")],
        vms={
            "ok": VmView("ok", "Always"),
            "mute": VmView("mute", "RerunOnFailure"),
            "failed": VmView("failed", "Always"),
            "none": VmView("none", "Always"),
            "halted": VmView("halted", "Halted"),
        },
    )
    found = lost_vms(snapshot, {"ok": True, "mute": False})
    assert {v.subject: v.detail for v in found} == {
        "failed": "VMI phase Failed",
        "mute": "the guest did not answer on its console",
        "none": "runStrategy Always, no VMI",
    }
    assert all(v.invariant == LOST_VMS for v in found)
