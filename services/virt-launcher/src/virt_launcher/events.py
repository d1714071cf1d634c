"""libvirt's event loop on asyncio: lifecycle callbacks are dispatched on our loop.

libvirt accepts one event implementation per process, so the first running loop
that asks wins; a later, different loop is refused with a clear error instead of
silently never receiving events.

libvirt calls the implementation's add/update/remove functions from whichever
thread is inside libvirt at the time, which for us is mostly an executor thread
(opening the connection adds its socket, every reply moves the keepalive timer).
libvirtaio touches the asyncio loop directly in those functions, which is only
safe on the loop's own thread, so it is handed a proxy that forwards every loop
operation through ``call_soon_threadsafe``, in order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import libvirtaio

__all__ = ["EventLoopConflictError", "drain_event_loop", "register_event_loop"]


class EventLoopConflictError(RuntimeError):
    """libvirt's events are already bound to another (still open) event loop."""


def _call_soon(loop: asyncio.AbstractEventLoop, fn: Callable[..., Any], *args: Any) -> bool:
    # libvirt may still free handles after the loop closed (objects collected at exit);
    # raising into its C callback then would crash the interpreter, and there is
    # nothing left to drive, so the request is dropped.
    try:
        loop.call_soon_threadsafe(fn, *args)
    except RuntimeError:
        return False
    return True


class _DeferredTask:
    """What ``create_task`` gives libvirtaio: a task started, and cancellable, from any thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any]) -> None:
        self._loop = loop
        self._task: asyncio.Task[Any] | None = None
        self._cancelled = False
        if not _call_soon(loop, self._start, coro):
            coro.close()

    def _start(self, coro: Coroutine[Any, Any, Any]) -> None:
        if self._cancelled:
            coro.close()
            return
        self._task = self._loop.create_task(coro)

    def cancel(self) -> bool:
        """Cancel the task (or keep it from starting); queued behind its start."""
        _call_soon(self._loop, self._cancel)
        return True

    def _cancel(self) -> None:
        self._cancelled = True
        if self._task is not None:
            self._task.cancel()


class _LoopFromAnyThread:
    """The loop as libvirtaio sees it: every operation runs on the loop, in call order."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.real = loop

    def _later(self, operation: Callable[..., Any], *args: Any) -> None:
        _call_soon(self.real, operation, *args)

    def add_reader(self, fd: int, callback: Callable[..., Any], *args: Any) -> None:
        self._later(self.real.add_reader, fd, callback, *args)

    def remove_reader(self, fd: int) -> None:
        self._later(self.real.remove_reader, fd)

    def add_writer(self, fd: int, callback: Callable[..., Any], *args: Any) -> None:
        self._later(self.real.add_writer, fd, callback, *args)

    def remove_writer(self, fd: int) -> None:
        self._later(self.real.remove_writer, fd)

    def create_task(self, coro: Coroutine[Any, Any, Any], **_: Any) -> _DeferredTask:
        return _DeferredTask(self.real, coro)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


def _bound_loop() -> asyncio.AbstractEventLoop | None:
    current = libvirtaio.getCurrentImpl()
    if current is None:
        return None
    loop: Any = current.loop
    real: asyncio.AbstractEventLoop = getattr(loop, "real", loop)
    return real


def register_event_loop() -> None:
    """Bind libvirt's event implementation to the running loop (once per process).

    Must be called from inside the running loop and before the first
    ``libvirt.open``; calling it again from the same loop does nothing.
    """
    loop = asyncio.get_running_loop()
    bound = _bound_loop()
    if bound is None:
        libvirtaio.virEventRegisterAsyncIOImpl(loop=_LoopFromAnyThread(loop))
        return
    if bound is not loop:
        raise EventLoopConflictError(
            "libvirt events are bound to another event loop of this process; "
            "libvirt allows one event implementation per process"
        )


async def drain_event_loop() -> None:
    """Wait until libvirt's pending handle and timer callbacks on this loop have run.

    Only meaningful once every connection is closed: an open connection keeps its
    handles registered, so this would wait for ever; callers bound it with a timeout.
    """
    current = libvirtaio.getCurrentImpl()
    if current is not None and _bound_loop() is asyncio.get_running_loop():
        await current.drain()
