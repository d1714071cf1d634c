"""The source's migration monitor: upstream's timeouts, on a clock the test turns."""

from __future__ import annotations

from virt_launcher.migration_record import MigrationMode
from virt_launcher.migration_source import (
    JobSample,
    MigrationMonitor,
    MigrationSettings,
    MonitorAction,
)

GIB = 1 << 30


def _monitor(limit: int = 150, **settings: object) -> MigrationMonitor:
    defaults: dict[str, object] = {"uid": "m", "progress_timeout": 150}
    return MigrationMonitor(MigrationSettings(**{**defaults, **settings}), limit, started_at=0.0)  # type: ignore[arg-type]


def _running(remaining: int) -> JobSample:
    return JobSample(active=True, data_remaining=remaining)


def test_a_migration_that_keeps_shrinking_is_left_alone_until_its_limit() -> None:
    monitor = _monitor(limit=150)
    for second in range(0, 150):
        assert (
            monitor.observe(float(second), _running(GIB - second)).action is MonitorAction.CONTINUE
        )
    verdict = monitor.observe(150.5, _running(1))
    assert verdict.action is MonitorAction.ABORT
    assert (
        verdict.reason == "Live migration is not completed after 150 seconds and has been aborted"
    )


def test_no_progress_for_the_progress_timeout_aborts() -> None:
    monitor = _monitor(limit=0, progress_timeout=5)
    monitor.observe(0.0, _running(100))
    for now in (1.0, 3.0, 5.0):
        assert monitor.observe(now, _running(100)).action is MonitorAction.CONTINUE
    verdict = monitor.observe(5.4, _running(100))
    assert verdict.action is MonitorAction.ABORT
    assert verdict.reason == "Live migration stuck for 5 seconds and has been aborted"


def test_shrinking_remaining_data_resets_the_progress_clock() -> None:
    monitor = _monitor(limit=0, progress_timeout=5)
    monitor.observe(0.0, _running(100))
    monitor.observe(4.0, _running(90))  # progress at 4 s
    assert monitor.observe(8.9, _running(90)).action is MonitorAction.CONTINUE
    assert monitor.observe(9.1, _running(95)).action is MonitorAction.ABORT


def test_samples_without_a_migration_job_decide_nothing() -> None:
    monitor = _monitor(limit=1, progress_timeout=1)
    assert monitor.observe(100.0, JobSample(active=False)).action is MonitorAction.CONTINUE


def test_with_workload_disruption_the_limit_pauses_the_guest_and_doubles() -> None:
    monitor = _monitor(limit=10, allow_workload_disruption=True, progress_timeout=0)
    assert monitor.observe(10.5, _running(5)).action is MonitorAction.PAUSE
    monitor.paused()
    assert monitor.mode is MigrationMode.PAUSED
    assert monitor.limit == 20
    assert monitor.observe(15.0, _running(4)).action is MonitorAction.CONTINUE
    assert monitor.observe(20.5, _running(3)).action is MonitorAction.ABORT


def test_with_post_copy_allowed_the_limit_switches_to_post_copy_and_then_never_aborts() -> None:
    monitor = _monitor(
        limit=10, allow_post_copy=True, allow_workload_disruption=True, progress_timeout=5
    )
    assert monitor.observe(10.5, _running(5)).action is MonitorAction.START_POST_COPY
    monitor.switched_to_post_copy()
    # Aborting now would lose the guest's state, which the target already runs.
    assert monitor.observe(1000.0, _running(5)).action is MonitorAction.CONTINUE


def test_post_copy_without_workload_disruption_is_not_forced_at_the_limit() -> None:
    # Upstream: only allowWorkloadDisruption (which defaults to allowPostCopy) assists.
    monitor = _monitor(limit=10, allow_post_copy=True, progress_timeout=0)
    assert monitor.observe(10.5, _running(5)).action is MonitorAction.ABORT


def test_job_stats_are_read_from_libvirts_answer() -> None:
    assert JobSample.from_stats({"type": 2, "data_remaining": 7}) == _running(7)
    assert JobSample.from_stats({"type": 0}) == JobSample(active=False)
