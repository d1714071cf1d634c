"""VMI status follows the launcher's domain: phases, conditions, node, launcher, guest."""

from __future__ import annotations

from typing import Any

from virt_handler import DomainView, GuestOsView, Observation, compute_status
from virt_rpc import DomainReason, DomainState

NOW = "2026-11-29T22:00:00Z"
#: A launcher pod the kubelet reports Ready (the VMI's Ready condition mirrors it).
READY_POD = {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}


def _vmi(phase: str, **status: Any) -> dict[str, Any]:
    return {"metadata": {"name": "v"}, "status": {"phase": phase, **status}}


def _obs(
    state: DomainState | None, reason: DomainReason = DomainReason.UNSPECIFIED, **kw: Any
) -> Observation:
    domain = None if state is None else DomainView(state, reason)
    kw.setdefault("pod", READY_POD)
    return Observation(node="kv-node-0", domain=domain, now=NOW, **kw)


def test_a_running_domain_makes_a_scheduled_vmi_running_and_ready() -> None:
    patch = compute_status(
        _vmi("Scheduled"), _obs(DomainState.RUNNING, DomainReason.BOOTED, launcher_image="img:1")
    )
    assert patch["phase"] == "Running"
    assert patch["phaseTransitionTimestamps"][-1] == {
        "phase": "Running",
        "phaseTransitionTimestamp": NOW,
    }
    assert patch["nodeName"] == "kv-node-0"
    assert patch["launcherContainerImageVersion"] == "img:1"
    ready = [c for c in patch["conditions"] if c["type"] == "Ready"]
    assert ready
    assert ready[0]["status"] == "True"


def test_nothing_changes_when_the_status_already_says_it() -> None:
    first = compute_status(_vmi("Scheduled"), _obs(DomainState.RUNNING))
    vmi = _vmi(
        "Running",
        nodeName="kv-node-0",
        conditions=first["conditions"],
        migrationMethod=first["migrationMethod"],
    )
    assert compute_status(vmi, _obs(DomainState.RUNNING)) == {}


def test_pausing_sets_paused_and_ready_follows_the_pod_then_unpausing_undoes_it() -> None:
    running = _vmi(
        "Running", nodeName="kv-node-0", conditions=[{"type": "Ready", "status": "True"}]
    )
    paused = compute_status(running, _obs(DomainState.PAUSED, DomainReason.USER))
    kinds = {c["type"]: c for c in paused["conditions"]}
    assert kinds["Paused"]["status"] == "True"
    assert kinds["Paused"]["reason"] == "PausedByUser"
    assert kinds["Ready"]["status"] == "True"  # the pod is still Ready
    assert "phase" not in paused
    # virt-controller flipped the readiness gate: the pod says why it is not Ready.
    gate = {
        "type": "Ready",
        "status": "False",
        "reason": "ReadinessGatesNotReady",
        "message": "the status of pod readiness gate is not True",
    }
    not_ready = {"status": {"phase": "Running", "conditions": [gate]}}
    again = compute_status(
        _vmi("Running", nodeName="kv-node-0", conditions=paused["conditions"]),
        _obs(DomainState.RUNNING, DomainReason.UNPAUSED, pod=not_ready),
    )
    kinds = {c["type"]: c for c in again["conditions"]}
    assert set(kinds) == {"Ready", "LiveMigratable"}
    assert (kinds["Ready"]["status"], kinds["Ready"]["reason"]) == (
        "False",
        "ReadinessGatesNotReady",
    )


def test_ready_alone_is_not_written_here() -> None:
    # A pod's readiness changing under a settled VMI is virt-controller's write.
    settled = compute_status(_vmi("Scheduled", nodeName="kv-node-0"), _obs(DomainState.RUNNING))
    vmi = _vmi(**{"nodeName": "kv-node-0", **settled})
    gone = {"status": {"phase": "Running"}}
    assert compute_status(vmi, _obs(DomainState.RUNNING, pod=gone)) == {}


def test_a_guest_powering_off_succeeds() -> None:
    patch = compute_status(
        _vmi("Running", nodeName="kv-node-0"),
        _obs(DomainState.SHUTOFF, DomainReason.GUEST_SHUTDOWN),
    )
    assert patch["phase"] == "Succeeded"


def test_a_killed_qemu_fails_the_vmi() -> None:
    for reason in (DomainReason.CRASHED, DomainReason.FAILED):
        patch = compute_status(
            _vmi("Running", nodeName="kv-node-0"), _obs(DomainState.SHUTOFF, reason)
        )
        assert patch["phase"] == "Failed", reason


def test_a_launcher_that_dies_fails_a_running_vmi() -> None:
    patch = compute_status(_vmi("Running", nodeName="kv-node-0"), _obs(None, launcher_gone=True))
    assert patch["phase"] == "Failed"
    assert patch["reason"] == "LauncherFailed"


def test_a_defined_but_not_started_domain_does_not_finish_a_scheduled_vmi() -> None:
    patch = compute_status(_vmi("Scheduled"), _obs(DomainState.SHUTOFF))
    assert "phase" not in patch


def test_final_phases_never_change() -> None:
    for phase in ("Succeeded", "Failed"):
        patch = compute_status(_vmi(phase), _obs(DomainState.RUNNING))
        assert "phase" not in patch


def test_other_controllers_conditions_are_kept() -> None:
    theirs = {"type": "DataVolumesReady", "status": "False", "reason": "X"}
    patch = compute_status(_vmi("Scheduled", conditions=[theirs]), _obs(DomainState.RUNNING))
    assert theirs in patch["conditions"]


def test_guest_os_info_from_an_agent() -> None:
    patch = compute_status(
        _vmi("Running", nodeName="kv-node-0", conditions=[{"type": "Ready", "status": "True"}]),
        _obs(
            DomainState.RUNNING,
            guest_os=GuestOsView(name="Debian", id="debian", version_id="12"),
            agent_connected=True,
        ),
    )
    assert patch["guestOSInfo"] == {"name": "Debian", "id": "debian", "versionId": "12"}
    assert any(c["type"] == "AgentConnected" for c in patch["conditions"])


def test_a_failure_names_its_cause_in_the_reason() -> None:
    crashed = compute_status(
        _vmi("Running", nodeName="kv-node-0"), _obs(DomainState.CRASHED, DomainReason.CRASHED)
    )
    assert (crashed["phase"], crashed["reason"]) == ("Failed", "DomainFailed")
    succeeded = compute_status(
        _vmi("Running", nodeName="kv-node-0"),
        _obs(DomainState.SHUTOFF, DomainReason.GUEST_SHUTDOWN),
    )
    assert "reason" not in succeeded
    pod_stopped = compute_status(
        _vmi("Running", nodeName="kv-node-0"),
        Observation(
            node="kv-node-0",
            domain=DomainView(DomainState.SHUTOFF, DomainReason.GUEST_SHUTDOWN, pod_stopping=True),
            now=NOW,
            pod=READY_POD,
        ),
    )
    assert (pod_stopped["phase"], pod_stopped["reason"]) == ("Failed", "PodStopped")


def test_a_launcher_gone_before_the_guest_ran_fails_a_scheduled_vmi() -> None:
    patch = compute_status(_vmi("Scheduled"), _obs(DomainState.SHUTOFF, launcher_gone=True))
    assert (patch["phase"], patch["reason"]) == ("Failed", "LauncherFailed")


def test_a_finished_vmi_is_not_ready_and_keeps_its_earlier_transitions() -> None:
    earlier = {"phase": "Running", "phaseTransitionTimestamp": "2026-11-29T21:00:00Z"}
    vmi = _vmi(
        "Running",
        nodeName="kv-node-0",
        phaseTransitionTimestamps=[earlier],
        conditions=[{"type": "Ready", "status": "True"}],
    )
    patch = compute_status(vmi, _obs(DomainState.SHUTOFF, DomainReason.DESTROYED))
    assert patch["phaseTransitionTimestamps"] == [
        earlier,
        {"phase": "Succeeded", "phaseTransitionTimestamp": NOW},
    ]
    (ready,) = patch["conditions"]
    assert (ready["status"], ready["reason"], ready["lastTransitionTime"]) == (
        "False",
        "GuestNotRunning",
        NOW,
    )
    assert "nodeName" not in patch


def test_an_unchanged_condition_keeps_its_transition_time() -> None:
    ready = {"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-29T21:00:00Z"}
    migratable = {
        "type": "LiveMigratable",
        "status": "True",
        "lastTransitionTime": "2026-11-29T21:00:00Z",
    }
    vmi = _vmi(
        "Running",
        nodeName="kv-node-0",
        conditions=[ready, migratable],
        migrationMethod="LiveMigration",
    )
    assert compute_status(vmi, _obs(DomainState.RUNNING)) == {}


def test_a_paused_vmi_that_finishes_drops_paused() -> None:
    vmi = _vmi(
        "Running",
        nodeName="kv-node-0",
        conditions=[
            {"type": "Ready", "status": "False"},
            {"type": "Paused", "status": "True", "reason": "PausedByUser"},
        ],
    )
    patch = compute_status(vmi, _obs(DomainState.SHUTOFF, DomainReason.DESTROYED))
    assert [c["type"] for c in patch["conditions"]] == ["Ready"]


def test_interface_macs_are_merged_into_status_interfaces() -> None:
    vmi = _vmi(
        "Running",
        nodeName="kv-node-0",
        conditions=[{"type": "Ready", "status": "True"}],
        interfaces=[{"name": "default", "ipAddress": "10.0.2.2"}],
    )
    seen = Observation(
        node="kv-node-0",
        domain=DomainView(
            DomainState.RUNNING,
            interfaces=(("default", "52:54:00:00:00:01"), ("data", "52:54:00:00:00:02")),
        ),
        now=NOW,
    )
    patch = compute_status(vmi, seen)
    # Without phase 1's networks (a restarted handler) the IPs already there are kept.
    assert patch["interfaces"] == [
        {
            "name": "default",
            "ipAddress": "10.0.2.2",
            "mac": "52:54:00:00:00:01",
            "infoSource": "domain",
        },
        {"name": "data", "mac": "52:54:00:00:00:02", "infoSource": "domain"},
    ]
    vmi["status"].update(patch)
    assert compute_status(vmi, seen) == {}
