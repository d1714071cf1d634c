"""SIGTERM drains: readiness fails, in-flight requests finish, background tasks stop."""

from __future__ import annotations

import asyncio
import os
import signal

import aiohttp
import pytest
from aiohttp import web
from service_kit import (
    EXIT_BACKGROUND_FAILED,
    EXIT_OK,
    Health,
    ServiceRunner,
    TCPListener,
    add_health_routes,
)


def base_url(runner: ServiceRunner) -> str:
    host, port = runner.addresses[0]  # type: ignore[misc]
    return f"http://{host}:{port}"


async def test_sigterm_lets_inflight_request_finish(no_blocking: None) -> None:
    entered, release = asyncio.Event(), asyncio.Event()
    stopped_background: list[str] = []

    async def slow(_request: web.Request) -> web.Response:
        entered.set()
        await release.wait()
        return web.Response(text="done")

    async def watcher(stop: asyncio.Event) -> None:
        await stop.wait()
        stopped_background.append("watcher")

    health = Health()
    app = web.Application()
    app.router.add_get("/slow", slow)
    add_health_routes(app, health)
    runner = ServiceRunner(
        app, [TCPListener("127.0.0.1", 0)], background={"watcher": watcher}, health=health
    )
    await runner.start()
    waiter = asyncio.create_task(runner.wait())
    url = base_url(runner) + "/slow"
    async with aiohttp.ClientSession() as session:
        inflight = asyncio.create_task(session.get(url))
        await entered.wait()
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.wait_for(runner.stop_event.wait(), 5)
        assert health.draining
        assert runner.stop_reason == "SIGTERM"
        assert not waiter.done()  # still waiting for the request
        release.set()
        response = await inflight
        assert (response.status, await response.text()) == (200, "done")
    assert await waiter == EXIT_OK
    assert stopped_background == ["watcher"]
    # Listeners are closed after shutdown.
    with pytest.raises(aiohttp.ClientConnectionError):
        async with aiohttp.ClientSession() as session:
            await session.get(url)


async def test_failed_background_task_stops_service_with_error_code() -> None:
    async def crashes(_stop: asyncio.Event) -> None:
        raise RuntimeError("informer died")

    async def well_behaved(stop: asyncio.Event) -> None:
        await stop.wait()

    runner = ServiceRunner(
        web.Application(),
        [TCPListener("127.0.0.1", 0)],
        background={"informer": crashes, "other": well_behaved},
    )
    assert await asyncio.wait_for(runner.run(), 10) == EXIT_BACKGROUND_FAILED
    assert runner.stop_reason == "background task informer failed"


async def test_background_task_returning_early_counts_as_failure() -> None:
    async def returns(_stop: asyncio.Event) -> None:
        return None

    runner = ServiceRunner(web.Application(), [], background={"loop": returns})
    assert await asyncio.wait_for(runner.run(), 10) == EXIT_BACKGROUND_FAILED


async def test_second_signal_cancels_stuck_background_work() -> None:
    cancelled: list[bool] = []
    started = asyncio.Event()

    async def ignores_stop(_stop: asyncio.Event) -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    runner = ServiceRunner(
        web.Application(), [], background={"stuck": ignores_stop}, shutdown_timeout=60
    )
    await runner.start()
    waiter = asyncio.create_task(runner.wait())
    await started.wait()
    os.kill(os.getpid(), signal.SIGINT)
    await asyncio.wait_for(runner.stop_event.wait(), 5)
    os.kill(os.getpid(), signal.SIGINT)
    assert await asyncio.wait_for(waiter, 10) == EXIT_OK
    assert cancelled == [True]


async def test_signal_handlers_are_removed_after_shutdown() -> None:
    runner = ServiceRunner(web.Application(), [])
    await runner.start()
    runner.request_stop()
    await runner.wait()
    assert signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None)
