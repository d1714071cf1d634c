"""The target launcher: ready for the incoming domain, then its landing reported once."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any, cast

import libvirt
from virt_launcher.migration_record import MigrationRecord, merge_into_metadata
from virt_launcher.migration_target import MigrationTarget
from virt_launcher.states import (
    EVENT_STARTED,
    EVENT_STOPPED,
    DomainReason,
    DomainState,
    DomainStatus,
    LifecycleEvent,
)

XML = "<domain type='qemu'><name>ns_vm</name><devices/></domain>"
INCOMING = {"type": libvirt.VIR_DOMAIN_JOB_UNBOUNDED, "operation": 4}
DONE = {"type": libvirt.VIR_DOMAIN_JOB_NONE}


class FakeGuest:
    def __init__(self, jobs: list[dict[str, object]], metadata: str | None) -> None:
        self.jobs = jobs
        self.metadata = metadata
        self.asked = 0

    async def job_stats(self) -> dict[str, object]:
        self.asked += 1
        return self.jobs.pop(0) if len(self.jobs) > 1 else self.jobs[0]

    async def metadata_element(self, uri: str) -> str | None:
        return self.metadata

    async def set_metadata_element(self, element: str, key: str, uri: str) -> None:
        self.metadata = element


class FakeManager:
    def __init__(self, guest: FakeGuest, state: DomainState = DomainState.RUNNING) -> None:
        self._guest = guest
        self.state = state
        self.hooks: list[Any] = []
        self.expected: str | None = None
        self.reported: list[MigrationRecord] = []

    def add_event_hook(self, hook: Any) -> None:
        self.hooks.append(hook)

    def expect_domain(self, domain_xml: str) -> None:
        self.expected = domain_xml

    async def guest(self) -> FakeGuest:
        return self._guest

    async def status(self) -> DomainStatus:
        return DomainStatus("ns_vm", "u", self.state, DomainReason.MIGRATED)

    async def record_migration(self, record: MigrationRecord) -> None:
        self.reported.append(record)

    def event(self, event: int, state: DomainState) -> None:
        for hook in self.hooks:
            hook(
                LifecycleEvent("ns_vm", "u", event, 1),
                DomainStatus("ns_vm", "u", state, DomainReason.MIGRATED),
            )


async def _no_wait(_seconds: float) -> None:
    await asyncio.sleep(0)


async def test_prepare_makes_the_proxy_dir_and_expects_the_domain(tmp_path: Path) -> None:
    manager = FakeManager(FakeGuest([DONE], None))
    proxy = tmp_path / "kubevirt" / "migrationproxy"
    target = MigrationTarget(cast(Any, manager), str(proxy), None, sleep=_no_wait)
    await target.prepare(XML)
    await target.prepare(XML)  # again: the same
    assert proxy.is_dir()
    assert proxy.stat().st_uid == os.geteuid()
    assert manager.expected == XML


async def test_the_landing_is_reported_once_no_incoming_job_remains(tmp_path: Path) -> None:
    carried = merge_into_metadata(None, MigrationRecord(uid="m-1"))
    guest = FakeGuest([INCOMING, INCOMING, DONE], carried)
    manager = FakeManager(guest)
    target = MigrationTarget(cast(Any, manager), str(tmp_path / "p"), None, sleep=_no_wait)

    manager.event(EVENT_STARTED, DomainState.RUNNING)  # before prepare: not ours to watch
    assert manager.reported == []
    await target.prepare(XML)
    manager.event(EVENT_STARTED, DomainState.PAUSED)
    manager.event(EVENT_STARTED, DomainState.RUNNING)  # a second event: one watch
    await target.wait()
    assert guest.asked == 3
    [landed] = manager.reported
    assert landed.uid == "m-1"
    assert landed.end is not None
    assert "<endTimestamp>" in (guest.metadata or "")


async def test_an_incoming_domain_that_went_away_reports_nothing(tmp_path: Path) -> None:
    manager = FakeManager(FakeGuest([DONE], None), state=DomainState.SHUTOFF)
    target = MigrationTarget(cast(Any, manager), str(tmp_path / "p"), None, sleep=_no_wait)
    await target.prepare(XML)
    manager.event(EVENT_STARTED, DomainState.PAUSED)
    await target.wait()
    manager.event(EVENT_STOPPED, DomainState.SHUTOFF)
    assert manager.reported == []
