"""Upstream advisory classes, seen from virt-handler (docs/security.md has the table).

- A fake "launcher" pod (the right labels, no controller ownerReference to the VMI) is
  never trusted: the handler does not reach its sockets (GHSA-9m94-w2vq-hcf9's class).
- A guest writing to its console at full speed while the client reads nothing: the relay
  holds the guest back instead of buffering without bound.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from kube_runtime import Result
from virt_handler import SERIAL_SOCKET, PodFiles, pod_uid
from virt_handler.notify import VmiIdentity
from virt_handler.relay import relay_routes

if TYPE_CHECKING:
    from conftest import Node


async def test_a_labelled_pod_without_an_owner_reference_is_not_the_launcher(
    node: Node,
) -> None:
    fake = node.pod_body("Running")
    del fake["metadata"]["ownerReferences"]
    fake["metadata"]["labels"] = {
        "kubevirt.io": "virt-launcher",
        "kubevirt.io/created-by": node.vmi_uid,
        "vm.kubevirt.io/name": "vm",
    }
    node.put_vmi(node.vmi_body("Scheduled"))
    node.put_pod(fake)
    await node.start_launcher()  # an answering "launcher" in the fake pod's sockets dir

    result = await node.sync.reconcile(node.key)

    assert node.launcher.calls == []  # never Handshake, never SyncVirtualMachine
    assert result == Result(requeue_after=node.sync.settings.waiting_resync)  # still waiting
    assert not (node.sockets_dir() / "domain-notify-pipe.sock").exists()


POD = "0b7c2b4e-6d0e-4f5e-9a53-1d5a0b7c2b4e"
VMI_UID = "7a1f0c3e-2b4d-4e6f-8a9b-0c1d2e3f4a5b"
CONSOLE = "/v1/namespaces/ns/virtualmachineinstances/vm/console"
FLOOD = 32 * 1024 * 1024
#: What may sit between the guest and a client that reads nothing: socket buffers on
#: both sides and the relay's own chunk and websocket buffer, far below the flood.
HELD_BACK = 8 * 1024 * 1024


@dataclass
class Record:
    identity: VmiIdentity
    pod: str


class Sync:
    def record_for(self, namespace: str, name: str) -> Record:
        return Record(VmiIdentity(namespace, name, VMI_UID), pod_uid(POD))


@dataclass
class FloodingGuest:
    """A serial console that writes FLOOD bytes as fast as its reader takes them."""

    sent: int = 0
    done: asyncio.Event = field(default_factory=asyncio.Event)


@pytest.fixture
async def flooding(tmp_path: Path) -> AsyncIterator[tuple[FloodingGuest, TestServer]]:
    guest_dir = tmp_path / "pods" / POD / "volumes" / "kubernetes.io~empty-dir" / "private"
    (guest_dir / VMI_UID).mkdir(parents=True)
    guest = FloodingGuest()
    chunk = b"y" * 65536

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while guest.sent < FLOOD:
                writer.write(chunk)
                await writer.drain()
                guest.sent += len(chunk)
            guest.done.set()
        except ConnectionError:
            pass
        writer.close()

    fd = os.open(guest_dir / VMI_UID, os.O_PATH | os.O_DIRECTORY)
    server = await asyncio.start_unix_server(serve, f"/proc/self/fd/{fd}/{SERIAL_SOCKET}")
    os.close(fd)
    app = web.Application()
    app.add_routes(relay_routes(Sync(), PodFiles(tmp_path / "pods")))  # type: ignore[arg-type]
    relay = TestServer(app)
    await relay.start_server()
    try:
        yield guest, relay
    finally:
        await relay.close()
        server.close()
        await server.wait_closed()


async def _until_stalled(guest: FloodingGuest) -> None:
    """Return when the guest has been unable to send for a while (or finished)."""
    last, still = -1, 0
    while not guest.done.is_set() and still < 10:
        await asyncio.sleep(0.05)
        still = still + 1 if guest.sent == last else 0
        last = guest.sent


async def test_a_console_flood_is_held_back_while_the_client_reads_nothing(
    flooding: tuple[FloodingGuest, TestServer],
) -> None:
    guest, relay = flooding
    async with (
        aiohttp.ClientSession() as session,
        session.ws_connect(relay.make_url(CONSOLE)) as ws,
    ):
        await asyncio.wait_for(_until_stalled(guest), 60)
        held = guest.sent
        assert not guest.done.is_set(), "the relay took the whole flood without a reader"
        assert held < HELD_BACK, f"{held} bytes left the guest while nobody read"

        received = 0
        while received < FLOOD:
            received += len(await asyncio.wait_for(ws.receive_bytes(), 30))
    assert received == FLOOD  # held back, not dropped
