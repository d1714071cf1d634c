"""Many creations or deletions at once, bounded, as upstream's controllers batch them."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import TypeVar

__all__ = ["BURST", "in_bursts"]

# Creations/deletions in flight at once per owner (upstream uses batches of this size).
BURST = 10

T = TypeVar("T")


async def in_bursts(
    items: Iterable[T], action: Callable[[T], Awaitable[object]], limit: int = BURST
) -> list[BaseException]:
    """Run `action` on every item, at most `limit` at once; the errors raised, in item order."""
    gate = asyncio.Semaphore(limit)

    async def one(item: T) -> None:
        async with gate:
            await action(item)

    results = await asyncio.gather(*(one(i) for i in items), return_exceptions=True)
    return [r for r in results if isinstance(r, BaseException)]
