"""Rotated certificate files reach new handshakes without a restart; broken ones do not."""

from __future__ import annotations

import asyncio
import os
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from aiohttp import web
from service_kit import (
    ReloadingContext,
    ServiceRunner,
    TCPListener,
    TLSError,
    TLSFiles,
    client_context,
    server_context,
)

if TYPE_CHECKING:
    from conftest import Pki


class StepClock:
    """A clock whose sleeps end only when the test calls :meth:`tick`."""

    def __init__(self) -> None:
        self.sleepers: asyncio.Queue[asyncio.Future[None]] = asyncio.Queue()

    async def sleep(self, seconds: float) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        await self.sleepers.put(future)
        await future

    async def tick(self) -> None:
        """Wake the sleeping watcher (waiting until it sleeps)."""
        (await self.sleepers.get()).set_result(None)

    async def settled(self) -> None:
        """Return once the watcher has finished its iteration and sleeps again."""
        future = await self.sleepers.get()
        self.sleepers.put_nowait(future)


def rotate(pki: Pki, name: str, serial: int) -> None:
    """Issue a new pair and swap it in atomically, as a Secret volume does."""
    staging = pki.directory / "staging"
    staging.mkdir(exist_ok=True)
    fresh = type(pki)(staging, pki.ca_key, pki.ca_cert)
    cert, key = fresh.issue(name, serial=serial)
    os.replace(key, pki.directory / f"{name}.key")
    os.replace(cert, pki.directory / f"{name}.crt")


async def served_serial(port: int, ca: Path) -> int:
    context = client_context(TLSFiles(ca=ca))
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context)
    try:
        ssl_object = writer.get_extra_info("ssl_object")
        assert isinstance(ssl_object, ssl.SSLObject)
        return int(ssl_object.getpeercert()["serialNumber"], 16)  # type: ignore[index,arg-type]
    finally:
        writer.close()
        await writer.wait_closed()


@pytest.fixture
async def reloading(pki: Pki) -> AsyncIterator[tuple[ReloadingContext, int, StepClock]]:
    cert, key = pki.issue("virt-api", serial=1001)
    clock = StepClock()
    tls = ReloadingContext(TLSFiles(cert, key), server_context, clock=clock)
    runner = ServiceRunner(
        web.Application(), [TCPListener("127.0.0.1", 0, tls.context)], signals=()
    )
    await runner.start()
    _, port = runner.addresses[0]  # type: ignore[misc]
    yield tls, port, clock
    runner.request_stop()
    await runner.wait()


async def test_rotation_reaches_new_handshakes(
    pki: Pki, reloading: tuple[ReloadingContext, int, StepClock]
) -> None:
    tls, port, _ = reloading
    assert await served_serial(port, pki.ca_path) == 1001
    assert not tls.reload_if_changed()
    rotate(pki, "virt-api", serial=1002)
    assert tls.reload_if_changed()
    assert await served_serial(port, pki.ca_path) == 1002
    assert not tls.reload_if_changed()


async def test_mismatched_pair_keeps_serving_the_old_one(
    pki: Pki, reloading: tuple[ReloadingContext, int, StepClock]
) -> None:
    tls, port, _ = reloading
    # Only the certificate was replaced so far: it does not match the key on disk.
    _, _ = pki.issue("other", serial=2002)
    os.replace(pki.directory / "other.crt", pki.directory / "virt-api.crt")
    with pytest.raises(TLSError, match="cannot load TLS material"):
        tls.reload_if_changed()
    assert await served_serial(port, pki.ca_path) == 1001
    # When the key follows, the same change is picked up.
    os.replace(pki.directory / "other.key", pki.directory / "virt-api.key")
    assert tls.reload_if_changed()
    assert await served_serial(port, pki.ca_path) == 2002


async def test_watch_polls_on_its_clock_until_stopped(
    pki: Pki, reloading: tuple[ReloadingContext, int, StepClock]
) -> None:
    tls, port, clock = reloading
    stop = asyncio.Event()
    task = asyncio.create_task(tls.watch(stop, interval=30))

    await clock.tick()
    await clock.settled()
    assert tls.reloads == 0

    rotate(pki, "virt-api", serial=3003)
    await clock.tick()
    await clock.settled()
    assert tls.reloads == 1
    assert await served_serial(port, pki.ca_path) == 3003

    stop.set()
    await asyncio.wait_for(task, 5)


async def test_watch_survives_broken_files(
    pki: Pki, reloading: tuple[ReloadingContext, int, StepClock]
) -> None:
    tls, port, clock = reloading
    stop = asyncio.Event()
    task = asyncio.create_task(tls.watch(stop, interval=30))
    (pki.directory / "virt-api.key").write_text("not a key")
    await clock.tick()
    await clock.settled()
    assert not task.done()
    assert tls.reloads == 0
    assert await served_serial(port, pki.ca_path) == 1001
    stop.set()
    await asyncio.wait_for(task, 5)
