"""port-forward through the handler: bytes both ways, refusals as a close reason, UDP.

A bridge-binding VMI whose pod IP is 127.0.0.1, so the handler dials a listener of the
test from its own netns; the masquerade path (a socket made in the pod's netns) is tested
for real in integration/network/test_portforward_netns.py.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from virt_handler import PodFiles, pod_uid
from virt_handler.notify import VmiIdentity
from virt_handler.portforward import ForwardTarget, PortForwardError, forward_target
from virt_handler.relay import relay_routes

POD = "0b7c2b4e-6d0e-4f5e-9a53-1d5a0b7c2b4e"
BASE = "/v1/namespaces/ns/virtualmachineinstances/vm/portforward"


def bridge_vmi(ip: str = "127.0.0.1") -> dict[str, Any]:
    return {
        "metadata": {"namespace": "ns", "name": "vm", "uid": "u"},
        "spec": {
            "networks": [{"name": "default", "pod": {}}],
            "domain": {"devices": {"interfaces": [{"name": "default", "bridge": {}}]}},
        },
        "status": {"interfaces": [{"name": "default", "ipAddress": ip}]},
    }


@dataclass
class Record:
    identity: VmiIdentity
    pod: str


class Vmis:
    def __init__(self, raw: dict[str, Any]) -> None:
        self.raw = raw

    def get_raw(self, key: str) -> dict[str, Any] | None:
        return self.raw if key == "ns/vm" else None


class Sync:
    def __init__(self, raw: dict[str, Any]) -> None:
        self.vmis = Vmis(raw)

    def record_for(self, namespace: str, name: str) -> Record:
        return Record(VmiIdentity(namespace, name, "u"), pod_uid(POD))


def free_port(kind: int = socket.SOCK_STREAM) -> int:
    with socket.socket(socket.AF_INET, kind) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
async def relay(tmp_path: Any) -> AsyncIterator[TestServer]:
    app = web.Application()
    app.add_routes(relay_routes(Sync(bridge_vmi()), PodFiles(tmp_path)))  # type: ignore[arg-type]
    server = TestServer(app)
    await server.start_server()
    try:
        yield server
    finally:
        await server.close()


async def test_tcp_bytes_flow_both_ways_and_the_guest_sees_the_end(relay: TestServer) -> None:
    ended = asyncio.Event()

    async def guest(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"SSH-2.0-dropbear\r\n")
        while data := await reader.read(1024):
            writer.write(data.upper())
        ended.set()
        writer.close()

    server = await asyncio.start_server(guest, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server, aiohttp.ClientSession() as session:
        async with session.ws_connect(relay.make_url(f"{BASE}/{port}")) as ws:
            assert (await ws.receive(timeout=5)).data == b"SSH-2.0-dropbear\r\n"
            await ws.send_bytes(b"hello")
            assert (await ws.receive(timeout=5)).data == b"HELLO"
        await asyncio.wait_for(ended.wait(), 5)


async def test_a_refused_port_ends_the_websocket_with_the_reason(relay: TestServer) -> None:
    port = free_port()
    async with (
        aiohttp.ClientSession() as session,
        session.ws_connect(relay.make_url(f"{BASE}/{port}/tcp")) as ws,
    ):
        message = await ws.receive(timeout=5)
        assert message.type is aiohttp.WSMsgType.CLOSE
        assert message.data == 1011
        assert message.extra == f"dialing tcp 127.0.0.1:{port}: Connection refused"


async def test_udp_messages_are_datagrams(relay: TestServer) -> None:
    loop = asyncio.get_running_loop()
    received: list[bytes] = []

    class Echo(asyncio.DatagramProtocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.transport = transport

        def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
            received.append(data)
            self.transport.sendto(b"echo:" + data, addr)  # type: ignore[attr-defined]

    transport, _ = await loop.create_datagram_endpoint(Echo, local_addr=("127.0.0.1", 0))
    port = transport.get_extra_info("sockname")[1]
    try:
        async with (
            aiohttp.ClientSession() as session,
            session.ws_connect(relay.make_url(f"{BASE}/{port}/udp")) as ws,
        ):
            await ws.send_bytes(b"one")
            await ws.send_bytes(b"two")
            assert (await ws.receive(timeout=5)).data == b"echo:one"
            assert (await ws.receive(timeout=5)).data == b"echo:two"
        assert received == [b"one", b"two"]
    finally:
        transport.close()


@pytest.mark.parametrize("tail", ["0", "65536", "22x", "22/sctp"])
async def test_bad_ports_are_refused_before_the_upgrade(relay: TestServer, tail: str) -> None:
    async with (
        aiohttp.ClientSession() as session,
        session.get(relay.make_url(f"{BASE}/{tail}")) as response,
    ):
        assert response.status == 400


def test_masquerade_and_default_interfaces_dial_loopback_in_the_pod() -> None:
    masquerade = bridge_vmi()
    masquerade["spec"]["domain"]["devices"]["interfaces"] = [{"name": "default", "masquerade": {}}]
    assert forward_target(masquerade) == ForwardTarget("127.0.0.1", in_pod=True)
    assert forward_target({"spec": {}}) == ForwardTarget("127.0.0.1", in_pod=True)
    assert forward_target(bridge_vmi("10.244.0.7")) == ForwardTarget("10.244.0.7", in_pod=False)
    with pytest.raises(PortForwardError, match="no pod IP"):
        forward_target(bridge_vmi(""))
