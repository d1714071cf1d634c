"""Shutdown asks the guest first and only destroys it when the grace period ends."""

from __future__ import annotations

import asyncio

import pytest
from virt_launcher import ChangeKind, DomainChange, DomainManager, DomainReason, DomainState, Notice

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


async def test_a_guest_that_powers_off_in_time_is_not_destroyed(
    test_driver_manager: DomainManager, domain_xml: str
) -> None:
    manager = test_driver_manager
    changes = manager.subscribe()
    await manager.sync(domain_xml)

    await manager.shutdown(grace_period=30)
    await asyncio.wait_for(manager.wait_stopped(), 10)

    # The test driver's guest obeys at once: a guest shutdown, no grace-period notice.
    seen: list[DomainChange | Notice] = []
    while not seen or not is_stop(seen[-1]):
        seen.append(await asyncio.wait_for(changes.get(), 10))
    last = seen[-1]
    assert isinstance(last, DomainChange)
    assert last.status.reason is DomainReason.GUEST_SHUTDOWN
    assert not [n for n in seen if isinstance(n, Notice)]


def is_stop(item: DomainChange | Notice) -> bool:
    return (
        isinstance(item, DomainChange)
        and item.kind is ChangeKind.MODIFIED
        and item.status.state is DomainState.SHUTOFF
    )


async def test_a_zero_grace_period_destroys_at_once(
    test_driver_manager: DomainManager, domain_xml: str
) -> None:
    manager = test_driver_manager
    await manager.sync(domain_xml)

    status = await manager.shutdown(grace_period=0)

    assert (status.state, status.reason) == (DomainState.SHUTOFF, DomainReason.DESTROYED)
