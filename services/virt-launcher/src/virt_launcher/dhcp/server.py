"""The guest's DHCPv4 server: one UDP socket per pod-network interface, on its bridge only.

Upstream's `SingleClientDHCPServer` (`pkg/network/dhcp/server`): DISCOVER gets an OFFER,
REQUEST an ACK, everything else nothing (no NAK, RELEASE and DECLINE ignored); bridge
binding answers only the guest's MAC. The socket listens on 0.0.0.0:67 with
SO_BINDTODEVICE on the bridge, so the kernel drops what arrives on any other link (works
unprivileged since Linux 5.7). Binding port 67 as uid 107 needs either
``net.ipv4.ip_unprivileged_port_start=0`` in the pod's netns (virt-handler's phase 1 sets
it) or CAP_NET_BIND_SERVICE.
"""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import socket
from typing import cast

from service_kit import get_logger

from virt_launcher.dhcp.offer import GuestOffer
from virt_launcher.dhcp.packet import (
    DhcpRequest,
    MalformedPacketError,
    MessageType,
    encode_reply,
    parse_request,
)

__all__ = ["DHCP_SERVER_PORT", "DhcpResponder", "DhcpServer", "DhcpStartError", "Reply"]

DHCP_SERVER_PORT = 67
_LIMITED_BROADCAST = "255.255.255.255"
_ANSWERS = {MessageType.DISCOVER: MessageType.OFFER, MessageType.REQUEST: MessageType.ACK}

_log = get_logger("virt_launcher.dhcp")

#: A datagram to send and where to.
Reply = tuple[bytes, tuple[str, int]]


class DhcpStartError(OSError):
    """The server's socket could not be made; the message says what the pod lacks."""


class DhcpResponder:
    """The server's decisions, without the socket: a datagram in, at most one reply out."""

    def __init__(self, offer: GuestOffer) -> None:
        self.offer = offer

    def answer(self, data: bytes, source: tuple[str, int]) -> Reply | None:
        """The reply to ``data`` from ``source``, or None when it gets none."""
        try:
            request = parse_request(data)
        except MalformedPacketError as exc:
            _log.debug("ignoring a datagram", source=source[0], reason=str(exc))
            return None
        if self.offer.client_mac is not None and request.mac != self.offer.client_mac:
            return None
        try:
            reply_type = _ANSWERS[MessageType(request.message_type)]
        except (KeyError, ValueError):
            return None
        packet = encode_reply(request, reply_type, self.offer.guest_ip, self.offer.options)
        _log.info(
            "dhcp reply",
            interface=self.offer.interface,
            type=reply_type.name,
            mac=request.mac,
            ip=str(self.offer.guest_ip),
        )
        return packet, _destination(request, source)


def _destination(request: DhcpRequest, source: tuple[str, int]) -> tuple[str, int]:
    # As krolaw/dhcp4 (upstream's library): broadcast unless the client has an address
    # and did not ask for broadcast; a client without an IP cannot take unicast yet.
    host, port = source
    if request.wants_broadcast or ipaddress.IPv4Address(host).is_unspecified:
        return _LIMITED_BROADCAST, port
    return host, port


class _Protocol(asyncio.DatagramProtocol):
    def __init__(self, responder: DhcpResponder) -> None:
        self._responder = responder
        self._transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: tuple[str | object, ...]) -> None:
        reply = self._responder.answer(data, (str(addr[0]), int(cast(int, addr[1]))))
        if reply is not None and self._transport is not None:
            self._transport.sendto(*reply)

    def error_received(self, exc: Exception) -> None:
        # A send that failed (e.g. the bridge went down) must not stop the server.
        _log.warning("dhcp socket error", interface=self._responder.offer.interface, error=str(exc))


def _bound_socket(bridge: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
        # Before bind: one socket per bridge may then share the port.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, bridge.encode())
        sock.bind(("0.0.0.0", port))
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        hint = ""
        if exc.errno == errno.EACCES and port < 1024:
            hint = (
                "; an unprivileged launcher needs net.ipv4.ip_unprivileged_port_start=0 in "
                "the pod's network namespace or CAP_NET_BIND_SERVICE"
            )
        elif exc.errno == errno.ENODEV:
            hint = "; the bridge does not exist in this network namespace"
        raise DhcpStartError(
            exc.errno, f"DHCP server on {bridge} port {port}: {exc.strerror}{hint}"
        ) from None
    return sock


class DhcpServer:
    """One running server; :meth:`start` binds, :meth:`close` stops."""

    def __init__(self, offer: GuestOffer, port: int = DHCP_SERVER_PORT) -> None:
        self.responder = DhcpResponder(offer)
        self._port = port
        self._transport: asyncio.DatagramTransport | None = None

    @property
    def offer(self) -> GuestOffer:
        """What this server hands out."""
        return self.responder.offer

    @property
    def port(self) -> int:
        """The bound UDP port (0 before :meth:`start`)."""
        if self._transport is None:
            return 0
        return int(self._transport.get_extra_info("sockname")[1])

    async def start(self) -> None:
        """Bind the socket on the offer's bridge; raises DhcpStartError saying why not."""
        sock = _bound_socket(self.offer.bridge, self._port)
        loop = asyncio.get_running_loop()
        transport, _ = await loop.create_datagram_endpoint(
            lambda: _Protocol(self.responder), sock=sock
        )
        self._transport = transport
        _log.info(
            "dhcp server listening",
            interface=self.offer.interface,
            bridge=self.offer.bridge,
            guest_ip=str(self.offer.guest_ip),
        )

    def close(self) -> None:
        """Stop answering (idempotent)."""
        if self._transport is not None:
            self._transport.close()
            self._transport = None
