"""A relay ends when either direction ends; the other is cancelled, nothing outlives it."""

from __future__ import annotations

import asyncio

from service_kit import pump_until_either_ends


async def test_the_first_direction_to_end_cancels_the_other() -> None:
    cancelled = asyncio.Event()

    async def forever() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async def closes() -> None:
        await asyncio.sleep(0)

    await asyncio.wait_for(pump_until_either_ends(forever(), closes()), 5)
    assert cancelled.is_set()


async def test_a_peer_that_resets_ends_the_relay_without_raising() -> None:
    async def resets() -> None:
        raise ConnectionResetError(104, "Connection reset by peer")

    async def forever() -> None:
        await asyncio.Event().wait()

    await asyncio.wait_for(pump_until_either_ends(resets(), forever()), 5)
