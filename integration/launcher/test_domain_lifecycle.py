"""The domain manager drives a test-driver domain and reports every change in order."""

from __future__ import annotations

import asyncio

import pytest
from virt_launcher import (
    ChangeKind,
    DomainChange,
    DomainManager,
    DomainNotFoundError,
    DomainReason,
    DomainState,
    Notice,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


async def next_change(queue: asyncio.Queue[DomainChange | Notice]) -> DomainChange:
    item = await asyncio.wait_for(queue.get(), 10)
    assert isinstance(item, DomainChange), item
    return item


async def test_sync_pause_unpause_kill_delete_report_each_change(
    test_driver_manager: DomainManager, domain_xml: str
) -> None:
    manager = test_driver_manager
    changes = manager.subscribe()

    status = await manager.sync(domain_xml)
    assert status.state is DomainState.RUNNING
    added = await next_change(changes)
    assert added.kind is ChangeKind.ADDED
    assert added.status.name == manager.domain_name
    started = await next_change(changes)
    assert (started.status.state, started.status.reason) == (
        DomainState.RUNNING,
        DomainReason.BOOTED,
    )

    assert (await manager.pause()).state is DomainState.PAUSED
    paused = await next_change(changes)
    assert (paused.status.state, paused.status.reason) == (DomainState.PAUSED, DomainReason.USER)

    assert (await manager.unpause()).state is DomainState.RUNNING
    resumed = await next_change(changes)
    assert (resumed.status.state, resumed.status.reason) == (
        DomainState.RUNNING,
        DomainReason.UNPAUSED,
    )

    assert (await manager.kill()).state is DomainState.SHUTOFF
    killed = await next_change(changes)
    assert (killed.status.state, killed.status.reason) == (
        DomainState.SHUTOFF,
        DomainReason.DESTROYED,
    )

    await manager.delete()
    deleted = await next_change(changes)
    assert deleted.kind is ChangeKind.DELETED
    assert await manager.status() is None
    sequences = [c.sequence for c in (added, started, paused, resumed, killed, deleted)]
    assert sequences == sorted(sequences)
    assert len(set(sequences)) == len(sequences)


async def test_sync_of_a_running_domain_changes_nothing(
    test_driver_manager: DomainManager, domain_xml: str
) -> None:
    manager = test_driver_manager
    changes = manager.subscribe()
    await manager.sync(domain_xml)
    await manager.pause()
    while (await next_change(changes)).status.state is not DomainState.PAUSED:
        pass

    status = await manager.sync(domain_xml)

    # Still paused: a sync never resumes or restarts a live domain.
    assert status.state is DomainState.PAUSED
    await manager.unpause()
    assert (await next_change(changes)).status.reason is DomainReason.UNPAUSED


async def test_commands_on_a_missing_domain_say_so(test_driver_manager: DomainManager) -> None:
    with pytest.raises(DomainNotFoundError, match="is not defined"):
        await test_driver_manager.pause()
    assert await test_driver_manager.status() is None
