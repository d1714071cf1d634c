"""libvirt's event loop on asyncio: lifecycle callbacks are dispatched on our loop.

libvirt accepts one event implementation per process, so the first running loop
that asks wins; a later, different loop is refused with a clear error instead of
silently never receiving events.
"""

from __future__ import annotations

import asyncio

import libvirtaio

__all__ = ["EventLoopConflictError", "register_event_loop"]


class EventLoopConflictError(RuntimeError):
    """libvirt's events are already bound to another (still open) event loop."""


def register_event_loop() -> None:
    """Bind libvirt's event implementation to the running loop (once per process).

    Must be called from inside the running loop and before the first
    ``libvirt.open``; calling it again from the same loop does nothing.
    """
    loop = asyncio.get_running_loop()
    current = libvirtaio.getCurrentImpl()
    if current is None:
        libvirtaio.virEventRegisterAsyncIOImpl(loop=loop)
        return
    bound: asyncio.AbstractEventLoop = current.loop
    if bound is not loop:
        raise EventLoopConflictError(
            "libvirt events are bound to another event loop of this process; "
            "libvirt allows one event implementation per process"
        )
