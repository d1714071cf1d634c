"""A ready launcher greets the handler on Notify at once; a missing handler is no error."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest
import virt_rpc
from virt_launcher.domain_manager import DomainManager, Notice
from virt_launcher.identity import VmiIdentity, VmiUid
from virt_launcher.notify import NotifyPusher
from virt_launcher.states import DomainChange

ME = VmiIdentity("ns", "vm", VmiUid("11111111-1111-1111-1111-111111111111"))


class _Manager:
    """What the pusher uses of a DomainManager: its subscription."""

    def __init__(self) -> None:
        self.queues: list[asyncio.Queue[DomainChange | Notice]] = []

    def subscribe(self) -> asyncio.Queue[DomainChange | Notice]:
        queue: asyncio.Queue[DomainChange | Notice] = asyncio.Queue()
        self.queues.append(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[DomainChange | Notice]) -> None:
        self.queues.remove(queue)


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="vl-", dir="/tmp"))  # socket paths fit 107 bytes
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _pusher(socket: Path) -> NotifyPusher:
    return NotifyPusher(socket, ME, cast(DomainManager, _Manager()), rpc_timeout=2.0)


async def test_greeting_says_hello_before_any_domain_event(sock_dir: Path) -> None:
    socket = sock_dir / "domain-notify-pipe.sock"
    heard: list[str] = []
    handshake = virt_rpc.HandshakeService(
        "virt-handler", "0.1.0", on_hello=lambda: heard.append("")
    )
    server = await virt_rpc.serve_unix([handshake], socket)
    pusher = _pusher(socket)
    try:
        await pusher.greet()
        assert len(heard) == 1
        await pusher.greet()  # already connected: no second hello
        assert len(heard) == 1
    finally:
        pusher._drop_channel()
        server.close()
        await server.wait_closed()


async def test_greeting_nobody_is_not_an_error(sock_dir: Path) -> None:
    await _pusher(sock_dir / "absent.sock").greet()
