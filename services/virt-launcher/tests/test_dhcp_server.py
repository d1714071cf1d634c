"""The server on a real UDP socket (on loopback here): answers, ignores, survives junk."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import AsyncIterator, Callable

import pytest
from virt_launcher.dhcp import DhcpServer, DhcpStartError, GuestOffer
from virt_launcher.dhcp.packet import MessageType
from virt_launcher.dhcp.server import DhcpResponder

#: Builds a client datagram (the ``dhcp_frame`` fixture in conftest.py).
DhcpFrame = Callable[..., bytes]


OFFER = GuestOffer(
    interface="default",
    bridge="lo",
    server_ip=ipaddress.IPv4Address("10.0.2.1"),
    guest_ip=ipaddress.IPv4Address("10.0.2.2"),
    client_mac=None,
    options=((26, b"\x05\xdc"),),
)


@pytest.fixture
async def server() -> AsyncIterator[DhcpServer]:
    running = DhcpServer(OFFER, port=0)
    await running.start()
    yield running
    running.close()


async def exchange(port: int, *datagrams: bytes) -> bytes | None:
    """Send ``datagrams``; the first reply within a second (None: no reply)."""
    loop = asyncio.get_running_loop()
    replies: asyncio.Queue[bytes] = asyncio.Queue()

    class Client(asyncio.DatagramProtocol):
        def datagram_received(self, data: bytes, addr: object) -> None:
            replies.put_nowait(data)

    transport, _ = await loop.create_datagram_endpoint(Client, local_addr=("127.0.0.1", 0))
    try:
        for data in datagrams:
            transport.sendto(data, ("127.0.0.1", port))
        try:
            return await asyncio.wait_for(replies.get(), 1.0)
        except TimeoutError:
            return None
    finally:
        transport.close()


async def test_discover_gets_an_offer_and_request_an_ack(
    server: DhcpServer, dhcp_frame: DhcpFrame
) -> None:

    offer = await exchange(server.port, dhcp_frame(MessageType.DISCOVER))
    assert offer is not None
    assert offer[240:243] == bytes([53, 1, MessageType.OFFER])
    assert offer[16:20] == bytes([10, 0, 2, 2])
    ack = await exchange(server.port, dhcp_frame(MessageType.REQUEST))
    assert ack is not None
    assert ack[240:243] == bytes([53, 1, MessageType.ACK])


async def test_junk_and_other_message_types_get_nothing_and_the_server_keeps_serving(
    server: DhcpServer, dhcp_frame: DhcpFrame
) -> None:
    junk = [
        b"",
        b"\x01" * 10,
        dhcp_frame(MessageType.RELEASE),
        dhcp_frame(MessageType.INFORM),
        dhcp_frame(MessageType.DECLINE),
        dhcp_frame(op=2),
        dhcp_frame(options=bytes([53, 9])),
    ]
    assert await exchange(server.port, *junk) is None
    # Still alive after all of it.
    assert await exchange(server.port, dhcp_frame(MessageType.DISCOVER)) is not None


def test_bridge_binding_answers_only_the_guests_mac(dhcp_frame: DhcpFrame) -> None:
    responder = DhcpResponder(
        GuestOffer("default", "lo", OFFER.server_ip, OFFER.guest_ip, "0a:58:0a:f4:00:07", ())
    )
    assert responder.answer(dhcp_frame(MessageType.DISCOVER), ("0.0.0.0", 68)) is None


def test_a_client_without_an_address_or_asking_for_broadcast_gets_a_broadcast(
    dhcp_frame: DhcpFrame,
) -> None:
    responder = DhcpResponder(OFFER)
    reply = responder.answer(dhcp_frame(MessageType.DISCOVER), ("0.0.0.0", 68))
    assert reply is not None
    assert reply[1] == ("255.255.255.255", 68)
    reply = responder.answer(dhcp_frame(MessageType.REQUEST, flags=0x8000), ("10.0.2.2", 68))
    assert reply is not None
    assert reply[1] == ("255.255.255.255", 68)
    reply = responder.answer(dhcp_frame(MessageType.REQUEST), ("10.0.2.2", 68))
    assert reply is not None
    assert reply[1] == ("10.0.2.2", 68)


async def test_a_missing_bridge_is_a_clear_start_error() -> None:
    missing = GuestOffer("default", "k6t-nothere", OFFER.server_ip, OFFER.guest_ip, None, ())
    with pytest.raises(DhcpStartError, match="does not exist"):
        await DhcpServer(missing, port=0).start()


def test_socket_module_has_bindtodevice() -> None:
    # The filter the server relies on; Python exposes it on Linux.
    assert hasattr(socket, "SO_BINDTODEVICE")
