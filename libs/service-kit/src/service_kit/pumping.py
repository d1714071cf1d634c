"""Relaying between two peers: copy both ways until either direction ends.

virt-api (client <-> virt-handler) and virt-handler (virt-api <-> the guest's console,
VNC or port) relay the same way: when one side closes, the other direction is cancelled
and both are waited for, so no copy task outlives the connection.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

__all__ = ["pump_until_either_ends"]


async def pump_until_either_ends(*directions: Awaitable[None]) -> None:
    """Run the copy ``directions`` until the first one returns or fails, then cancel the
    others and wait for them. The first direction's exception, if any, is not raised: a
    peer that resets is the end of a relay, not an error of it."""
    tasks = [asyncio.ensure_future(d) for d in directions]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
