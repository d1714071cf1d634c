"""The console/VNC relay carries bytes both ways and never leaves a connection open."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from virt_handler import SERIAL_SOCKET, PodFiles, pod_uid
from virt_handler.notify import VmiIdentity
from virt_handler.podfiles import SERIAL_LOG
from virt_handler.relay import relay_routes

POD = "0b7c2b4e-6d0e-4f5e-9a53-1d5a0b7c2b4e"
VMI_UID = "7a1f0c3e-2b4d-4e6f-8a9b-0c1d2e3f4a5b"
CONSOLE = "/v1/namespaces/ns/virtualmachineinstances/vm/console"
GREETING = b"\r\ndebian login: "


@dataclass
class Record:
    identity: VmiIdentity
    pod: str


class Sync:
    """Just what the relay asks of VmiSync: where the VMI's launcher is."""

    def record_for(self, namespace: str, name: str) -> Record:
        return Record(VmiIdentity(namespace, name, VMI_UID), pod_uid(POD))


@dataclass
class Guest:
    """The guest side of the serial socket: what it received, and when the relay let go."""

    accepted: asyncio.Event
    closed: asyncio.Event
    received: bytearray
    directory: Path


@pytest.fixture
async def guest(tmp_path: Path) -> AsyncIterator[Guest]:
    guest_dir = (
        tmp_path / "pods" / POD / "volumes" / "kubernetes.io~empty-dir" / "private" / VMI_UID
    )
    guest_dir.mkdir(parents=True)
    seen = Guest(asyncio.Event(), asyncio.Event(), bytearray(), guest_dir)

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.accepted.set()
        try:
            writer.write(GREETING)
            seen.received += await reader.read()  # returns at EOF: the relay closed its side
        except ConnectionError:
            pass  # the relay closed before our greeting went out
        seen.closed.set()
        writer.close()

    # Bound through a short /proc path: the test's tmp dir can be deep.
    fd = os.open(guest_dir, os.O_PATH | os.O_DIRECTORY)
    server = await asyncio.start_unix_server(serve, f"/proc/self/fd/{fd}/{SERIAL_SOCKET}")
    os.close(fd)
    try:
        yield seen
    finally:
        server.close()
        await server.wait_closed()


@pytest.fixture
async def relay(tmp_path: Path) -> AsyncIterator[TestServer]:
    app = web.Application()
    app.add_routes(relay_routes(Sync(), PodFiles(tmp_path / "pods")))
    server = TestServer(app)
    await server.start_server()
    try:
        yield server
    finally:
        await server.close()


async def test_the_guest_connection_is_closed_when_the_websocket_cannot_be_prepared(
    guest: Guest, relay: TestServer
) -> None:
    # A plain GET: the websocket handshake (ws.prepare) fails.
    async with aiohttp.ClientSession() as session, session.get(relay.make_url(CONSOLE)) as response:
        assert response.status == 400

    await asyncio.wait_for(guest.accepted.wait(), 5)
    await asyncio.wait_for(guest.closed.wait(), 5)


async def test_console_bytes_reach_the_guest_and_the_connection_ends_with_the_client(
    guest: Guest, relay: TestServer
) -> None:
    async with (
        aiohttp.ClientSession() as session,
        session.ws_connect(relay.make_url(CONSOLE)) as ws,
    ):
        await ws.send_bytes(b"root\n")
        await asyncio.wait_for(guest.accepted.wait(), 5)
        assert not guest.closed.is_set()
    await asyncio.wait_for(guest.closed.wait(), 5)
    assert guest.received == b"root\n"


async def test_guest_output_reaches_the_client_after_the_log_it_missed(
    guest: Guest, relay: TestServer
) -> None:
    # Boot output written while nobody was attached is in the serial log.
    (guest.directory / SERIAL_LOG).write_bytes(b"x" * 20000 + b"[  OK  ] Reached target")
    async with (
        aiohttp.ClientSession() as session,
        session.ws_connect(relay.make_url(CONSOLE)) as ws,
    ):
        history = await asyncio.wait_for(ws.receive_bytes(), 5)
        assert len(history) == 16 * 1024
        assert history.endswith(b"[  OK  ] Reached target")
        live = await asyncio.wait_for(ws.receive_bytes(), 5)
        assert live == GREETING


async def test_a_symlinked_serial_log_is_not_read(
    guest: Guest, relay: TestServer, tmp_path: Path
) -> None:
    secret = tmp_path / "secret"
    secret.write_bytes(b"host secret")
    (guest.directory / SERIAL_LOG).symlink_to(secret)
    async with (
        aiohttp.ClientSession() as session,
        session.ws_connect(relay.make_url(CONSOLE)) as ws,
    ):
        assert await asyncio.wait_for(ws.receive_bytes(), 5) == GREETING
