"""A stop followed by a start within the window is a reboot and is not reported as a stop."""

from __future__ import annotations

import asyncio

import pytest
from virt_launcher import (
    BlockingExecutor,
    DomainChange,
    DomainManager,
    DomainReason,
    DomainState,
    Host,
    Notice,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


async def next_change(queue: asyncio.Queue[DomainChange | Notice]) -> DomainChange:
    item = await asyncio.wait_for(queue.get(), 10)
    assert isinstance(item, DomainChange), item
    return item


async def test_stop_then_start_within_the_window_is_not_a_stop(
    test_driver_manager: DomainManager, domain_xml: str, executor: BlockingExecutor
) -> None:
    manager = test_driver_manager
    changes = manager.subscribe()
    await manager.sync(domain_xml)
    while (await next_change(changes)).status.state is not DomainState.RUNNING:
        pass
    # Stop and start behind the manager's back, as libvirt does for a reboot by restart.
    other = Host("test:///default", executor)
    await other.connect(lambda _event: None)
    try:
        guest = await other.lookup(manager.domain_name)
        assert guest is not None
        await guest.destroy()
        await guest.launch()
    finally:
        await other.close()

    change = await next_change(changes)

    # The start cancels the held stop for good, so nothing about the stop can follow.
    assert (change.status.state, change.status.reason) == (
        DomainState.RUNNING,
        DomainReason.BOOTED,
    )
    await manager.pause()
    assert (await next_change(changes)).status.state is DomainState.PAUSED


async def test_a_stop_without_a_start_is_reported_after_the_window(
    test_driver_manager: DomainManager, domain_xml: str, executor: BlockingExecutor
) -> None:
    manager = test_driver_manager
    changes = manager.subscribe()
    await manager.sync(domain_xml)
    while (await next_change(changes)).status.state is not DomainState.RUNNING:
        pass
    other = Host("test:///default", executor)
    await other.connect(lambda _event: None)
    try:
        guest = await other.lookup(manager.domain_name)
        assert guest is not None
        await guest.destroy()
    finally:
        await other.close()

    change = await next_change(changes)

    assert (change.status.state, change.status.reason) == (
        DomainState.SHUTOFF,
        DomainReason.DESTROYED,
    )


async def test_a_held_stop_is_reported_before_a_later_undefine(
    test_driver_manager: DomainManager, domain_xml: str, executor: BlockingExecutor
) -> None:
    manager = test_driver_manager
    changes = manager.subscribe()
    await manager.sync(domain_xml)
    while (await next_change(changes)).status.state is not DomainState.RUNNING:
        pass
    other = Host("test:///default", executor)
    await other.connect(lambda _event: None)
    try:
        guest = await other.lookup(manager.domain_name)
        assert guest is not None
        await guest.destroy()
        await guest.undefine()
    finally:
        await other.close()

    stopped = await next_change(changes)
    deleted = await next_change(changes)

    assert stopped.status.state is DomainState.SHUTOFF
    assert deleted.status.reason is DomainReason.NON_EXISTENT
