"""What libvirtaio does to the loop from libvirt's threads happens on the loop, in order."""

from __future__ import annotations

import asyncio
import os
import threading

from virt_launcher.events import _LoopFromAnyThread


async def test_a_task_created_from_another_thread_runs_on_the_loop() -> None:
    loop = asyncio.get_running_loop()
    proxy = _LoopFromAnyThread(loop)
    ran_on: list[int] = []
    done = asyncio.Event()

    async def timer() -> None:
        ran_on.append(threading.get_ident())
        done.set()

    await asyncio.to_thread(proxy.create_task, timer())
    await asyncio.wait_for(done.wait(), 5)

    assert ran_on == [threading.get_ident()]


async def test_a_task_cancelled_from_another_thread_stops() -> None:
    loop = asyncio.get_running_loop()
    proxy = _LoopFromAnyThread(loop)
    started = asyncio.Event()
    stopped = asyncio.Event()

    async def timer() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            stopped.set()

    handle = await asyncio.to_thread(proxy.create_task, timer())
    await asyncio.wait_for(started.wait(), 5)
    await asyncio.to_thread(handle.cancel)

    await asyncio.wait_for(stopped.wait(), 5)


async def test_a_task_cancelled_before_it_started_never_runs() -> None:
    loop = asyncio.get_running_loop()
    proxy = _LoopFromAnyThread(loop)
    ran = False

    async def timer() -> None:
        nonlocal ran
        ran = True

    # Both requests are queued before the loop gets to run either of them.
    proxy.create_task(timer()).cancel()
    for _ in range(5):
        await asyncio.sleep(0)

    assert not ran


async def test_readers_added_and_removed_from_another_thread_keep_their_order() -> None:
    loop = asyncio.get_running_loop()
    proxy = _LoopFromAnyThread(loop)
    read_fd, write_fd = os.pipe()
    fired = asyncio.Event()
    try:

        def register() -> None:
            proxy.add_reader(read_fd, lambda: None)
            proxy.remove_reader(read_fd)
            proxy.add_reader(read_fd, fired.set)

        await asyncio.to_thread(register)
        os.write(write_fd, b"x")

        await asyncio.wait_for(fired.wait(), 5)
    finally:
        loop.remove_reader(read_fd)
        os.close(read_fd)
        os.close(write_fd)
