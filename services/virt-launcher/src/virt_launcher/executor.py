"""The one thread pool every blocking libvirt call runs in.

libvirt-python blocks the calling thread on every RPC to libvirtd, so no libvirt
call may run on the event loop. ``loop.run_in_executor`` alone drops contextvars
(structlog's bound context), hence each call runs inside a copy of the caller's
context.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

__all__ = ["BlockingExecutor"]

_P = ParamSpec("_P")
_T = TypeVar("_T")


class BlockingExecutor:
    """A dedicated thread pool that runs blocking calls with the caller's contextvars."""

    def __init__(self, max_workers: int = 4, name: str = "libvirt") -> None:
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix=name)

    async def run(self, fn: Callable[_P, _T], /, *args: _P.args, **kwargs: _P.kwargs) -> _T:
        """Run ``fn(*args, **kwargs)`` in the pool and return its result (or raise)."""
        loop = asyncio.get_running_loop()
        ctx = contextvars.copy_context()
        call = functools.partial(ctx.run, fn, *args, **kwargs)
        return await loop.run_in_executor(self._pool, call)

    def shutdown(self) -> None:
        """Stop accepting work; running calls finish in their threads."""
        self._pool.shutdown(wait=False, cancel_futures=True)
