"""Blocking calls run in the executor's threads, with the caller's contextvars."""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Iterator

import pytest
from virt_launcher import BlockingExecutor

request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")


@pytest.fixture
def executor() -> Iterator[BlockingExecutor]:
    pool = BlockingExecutor(max_workers=2, name="test-libvirt")
    yield pool
    pool.shutdown()


async def test_calls_see_the_callers_contextvars(executor: BlockingExecutor) -> None:
    request_id.set("sync-42")

    seen = await executor.run(request_id.get)

    assert seen == "sync-42"


async def test_calls_run_off_the_event_loop_thread(executor: BlockingExecutor) -> None:
    name = await executor.run(lambda: threading.current_thread().name)

    assert name.startswith("test-libvirt")
    assert name != threading.current_thread().name


async def test_exceptions_reach_the_caller(executor: BlockingExecutor) -> None:
    def fail() -> None:
        raise ValueError("libvirt said no")

    with pytest.raises(ValueError, match="libvirt said no"):
        await executor.run(fail)
