"""The source launcher's migration: result, timeouts and abort, over a scripted libvirt."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import libvirt
import pytest
from kubevirt_api.migrations import FORCE_LAUNCHER_MIGRATION_FAILURE_ANNOTATION
from virt_launcher.errors import LibvirtError
from virt_launcher.migration_record import AbortStatus, MigrationRecord, record_from_metadata
from virt_launcher.migration_source import (
    MigrationRefusedError,
    MigrationSettings,
    MigrationSource,
)
from virt_launcher.states import (
    EVENT_UNDEFINED,
    DomainReason,
    DomainState,
    DomainStatus,
    LifecycleEvent,
)

DOMAIN = """<domain type='qemu'><name>ns_vm</name><memory unit='b'>134217728</memory>
<devices><disk type='file' device='disk'><source file='/e/disk-data/root/disk.qcow2'/>
<target dev='vda' bus='virtio'/><alias name='ua-root'/></disk></devices></domain>"""
VMI: dict[str, Any] = {
    "metadata": {"name": "vm", "namespace": "ns"},
    "spec": {"volumes": [{"name": "root", "containerDisk": {"image": "x"}}]},
}


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class FakeGuest:
    """A running domain whose migration job the test drives."""

    name = "ns_vm"

    def __init__(self, clock: FakeClock, remaining: list[int]) -> None:
        self._clock = clock
        self._remaining = remaining
        self.migration_started = asyncio.Event()
        self.outcome: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.calls: list[tuple[Any, ...]] = []
        self.metadata: str | None = None
        self.abort_fails = False
        self.active = True

    async def is_active(self) -> bool:
        return self.active

    async def status(self) -> DomainStatus:
        return DomainStatus(self.name, "u", DomainState.RUNNING, DomainReason.BOOTED)

    async def migratable_xml(self) -> str:
        return DOMAIN

    async def migrate(self, uri: str, params: dict[str, object], flags: int) -> None:
        self.calls.append(("migrate", uri, params, flags))
        self.migration_started.set()
        await self.outcome

    async def job_stats(self) -> dict[str, object]:
        # Every look at the job is a second later: the monitor's clock moves with it.
        self._clock.now += 1.0
        if self.outcome.done():
            return {"type": libvirt.VIR_DOMAIN_JOB_NONE}
        remaining = self._remaining.pop(0) if len(self._remaining) > 1 else self._remaining[0]
        return {"type": libvirt.VIR_DOMAIN_JOB_UNBOUNDED, "data_remaining": remaining}

    async def abort_job(self) -> None:
        self.calls.append(("abort",))
        if self.abort_fails:
            raise LibvirtError("cannot abort now")
        self.outcome.set_exception(
            LibvirtError("operation aborted: migration out job: canceled by client")
        )

    async def start_post_copy(self) -> None:
        self.calls.append(("post-copy",))

    async def pause(self) -> None:
        self.calls.append(("pause",))

    async def metadata_element(self, uri: str) -> str | None:
        return self.metadata

    async def set_metadata_element(self, element: str, key: str, uri: str) -> None:
        self.metadata = element


class FakeManager:
    def __init__(self, guest: FakeGuest) -> None:
        self._guest = guest
        self.migration: MigrationRecord | None = None
        self.reported: list[MigrationRecord] = []
        self.changed = asyncio.Event()
        self.hooks: list[Any] = []

    def add_event_hook(self, hook: Any) -> None:
        self.hooks.append(hook)

    def undefined(self) -> None:
        for hook in self.hooks:
            hook(
                LifecycleEvent("ns_vm", "u", EVENT_UNDEFINED, 0),
                DomainStatus("ns_vm", "u", DomainState.SHUTOFF, DomainReason.NON_EXISTENT),
            )

    async def guest(self) -> FakeGuest:
        return self._guest

    async def record_migration(self, record: MigrationRecord) -> None:
        self.migration = record
        self.reported.append(record)
        self.changed.set()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


async def _source(
    clock: FakeClock, remaining: list[int] | None = None
) -> tuple[MigrationSource, FakeGuest, FakeManager]:
    guest = FakeGuest(clock, remaining or [100])
    manager = FakeManager(guest)
    source = MigrationSource(
        cast(Any, manager), "/proxy", "/nonexistent", clock=clock, sleep=_yield, period=0.001
    )
    return source, guest, manager


async def _yield(_seconds: float) -> None:
    await asyncio.sleep(0)


async def test_a_migration_that_libvirt_completes_is_recorded_completed(
    clock: FakeClock,
) -> None:
    source, guest, manager = await _source(clock)
    await source.start(VMI, MigrationSettings(uid="m-1", block_migration=True))
    await guest.migration_started.wait()
    _, uri, params, flags = guest.calls[0]
    assert uri == "qemu+unix:///session?socket=/proxy/m-1-source.sock"
    assert params["migrate_disks"] == ["vda"]
    assert flags & libvirt.VIR_MIGRATE_NON_SHARED_INC
    # Before the job held the domain, the record went into its metadata (to the target).
    before = record_from_metadata(guest.metadata or "")
    assert before is not None
    assert before.uid == "m-1"
    assert before.start is not None

    manager.undefined()  # deleted before it migrated: the launcher still has work
    assert not source.departed.is_set()

    guest.outcome.set_result(None)
    await source.wait()
    final = manager.migration
    assert final is not None
    assert final.completed
    assert not final.failed
    assert final.end is not None
    assert record_from_metadata(guest.metadata or "") == final
    # Migrated, then deleted by the handler: the launcher is done (its pod completes).
    manager.undefined()
    assert source.departed.is_set()


async def test_no_progress_aborts_with_upstreams_reason(clock: FakeClock) -> None:
    source, guest, manager = await _source(clock, remaining=[100])
    await source.start(VMI, MigrationSettings(uid="m-1", progress_timeout=3))
    await source.wait()
    assert ("abort",) in guest.calls
    final = manager.migration
    assert final is not None
    assert final.failed
    assert final.failure_reason.startswith("Live migration stuck for ")
    assert final.failure_reason.endswith(" seconds and has been aborted")
    assert final.abort_status is AbortStatus.SUCCEEDED


async def test_the_completion_limit_aborts(clock: FakeClock) -> None:
    # 128 MiB counts as 1 GiB: 2 s per GiB is a 2 s limit; data shrinks, so no stall.
    source, _guest, manager = await _source(clock, remaining=list(range(1000, 0, -1)))
    await source.start(VMI, MigrationSettings(uid="m-1", completion_timeout_per_gib=2))
    await source.wait()
    final = manager.migration
    assert final is not None
    assert final.failure_reason == (
        "Live migration is not completed after 2 seconds and has been aborted"
    )


async def test_a_cancel_aborts_the_job_and_the_guest_stays(clock: FakeClock) -> None:
    source, guest, manager = await _source(clock, remaining=list(range(10**6, 0, -1)))
    await source.start(VMI, MigrationSettings(uid="m-1"))
    await guest.migration_started.wait()
    await source.cancel()
    assert manager.reported[-1].abort_status is AbortStatus.IN_PROGRESS
    await source.cancel()  # asked twice: still one abort
    await source.wait()
    assert guest.calls.count(("abort",)) == 1
    final = manager.migration
    assert final is not None
    assert final.failed
    assert final.failure_reason == "Live migration aborted"
    assert final.abort_status is AbortStatus.SUCCEEDED


async def test_an_abort_libvirt_refuses_is_reported_failed(clock: FakeClock) -> None:
    source, guest, manager = await _source(clock, remaining=list(range(10**6, 0, -1)))
    guest.abort_fails = True
    await source.start(VMI, MigrationSettings(uid="m-1"))
    await guest.migration_started.wait()
    await source.cancel()
    while manager.reported[-1].abort_status is not AbortStatus.FAILED:
        manager.changed.clear()
        await manager.changed.wait()
    guest.outcome.set_result(None)  # and the migration goes on to its end
    await source.wait()
    final = manager.migration
    assert final is not None
    assert final.completed
    assert final.abort_status is AbortStatus.FAILED


async def test_the_test_annotation_fails_at_once(clock: FakeClock) -> None:
    source, guest, manager = await _source(clock)
    vmi = {**VMI, "metadata": {"annotations": {FORCE_LAUNCHER_MIGRATION_FAILURE_ANNOTATION: ""}}}
    await source.start(vmi, MigrationSettings(uid="m-1"))
    await source.wait()
    assert guest.calls == []
    final = manager.migration
    assert final is not None
    assert final.failed
    assert final.failure_reason == "Failed migration to satisfy functional test condition"


async def test_a_migration_runs_once_per_uid_and_only_a_running_one_is_cancelled(
    clock: FakeClock,
) -> None:
    source, guest, _manager = await _source(clock, remaining=list(range(10**6, 0, -1)))
    with pytest.raises(MigrationRefusedError):
        await source.cancel()
    await source.start(VMI, MigrationSettings(uid="m-1"))
    await source.start(VMI, MigrationSettings(uid="m-1"))  # the one in progress: no-op
    with pytest.raises(MigrationRefusedError):
        await source.start(VMI, MigrationSettings(uid="m-2"))
    await guest.migration_started.wait()
    guest.outcome.set_result(None)
    await source.wait()
    assert [c[0] for c in guest.calls] == ["migrate"]
    with pytest.raises(MigrationRefusedError, match="already ran"):
        await source.start(VMI, MigrationSettings(uid="m-1"))
    with pytest.raises(MigrationRefusedError, match="not migrating"):
        await source.cancel()
