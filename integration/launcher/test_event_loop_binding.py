"""libvirt's events are bound to one loop per process; a second loop is refused clearly."""

from __future__ import annotations

import asyncio

import pytest
from virt_launcher import DomainManager, EventLoopConflictError, register_event_loop

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


def _register_from_another_loop() -> None:
    async def register() -> None:
        register_event_loop()

    asyncio.run(register())


async def test_registering_again_from_the_same_loop_is_harmless(
    test_driver_manager: DomainManager,
) -> None:
    register_event_loop()

    assert await test_driver_manager.status() is None


async def test_another_loop_is_refused(test_driver_manager: DomainManager) -> None:
    # The fixture's manager bound libvirt's events to this (the session's) loop.
    with pytest.raises(EventLoopConflictError, match="one event implementation per process"):
        await asyncio.to_thread(_register_from_another_loop)
