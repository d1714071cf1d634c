"""DHCPv4 messages (RFC 2131/2132) as bytes <-> values: parsing requests, encoding replies.

Pure, no I/O. The parser trusts nothing: every length is checked against the buffer and
anything it cannot read raises :class:`MalformedPacketError`, never another exception.
Only what the server needs is decoded (the message type, the client's addresses and MAC);
option overload (52) is not followed, so ``sname``/``file`` can never loop back.
"""

from __future__ import annotations

import ipaddress
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum

__all__ = [
    "MAGIC_COOKIE",
    "MIN_REPLY_SIZE",
    "DhcpRequest",
    "MalformedPacketError",
    "MessageType",
    "Option",
    "encode_reply",
    "parse_request",
]

#: RFC 2131 §3: the four octets before the options field.
MAGIC_COOKIE = b"\x63\x82\x53\x63"
#: BOOTP's minimum message (RFC 1542 §2.1); some clients drop shorter replies.
MIN_REPLY_SIZE = 300

_BOOTREQUEST = 1
_BOOTREPLY = 2
_HTYPE_ETHERNET = 1
_BROADCAST_FLAG = 0x8000
# op htype hlen hops xid secs flags ciaddr yiaddr siaddr giaddr chaddr(16) sname(64) file(128)
_HEADER = struct.Struct("!BBBBIHH4s4s4s4s16s64s128s")
_FIXED = _HEADER.size + len(MAGIC_COOKIE)
_PAD = 0
_END = 255


class Option(IntEnum):
    """The option codes this server reads or writes."""

    SUBNET_MASK = 1
    ROUTER = 3
    DOMAIN_NAME_SERVER = 6
    HOST_NAME = 12
    DOMAIN_NAME = 15
    INTERFACE_MTU = 26
    NTP_SERVERS = 42
    LEASE_TIME = 51
    MESSAGE_TYPE = 53
    SERVER_IDENTIFIER = 54
    TFTP_SERVER_NAME = 66
    BOOTFILE_NAME = 67
    DOMAIN_SEARCH = 119
    CLASSLESS_ROUTES = 121


class MessageType(IntEnum):
    """Option 53's values (RFC 2132 §9.6)."""

    DISCOVER = 1
    OFFER = 2
    REQUEST = 3
    DECLINE = 4
    ACK = 5
    NAK = 6
    RELEASE = 7
    INFORM = 8


class MalformedPacketError(ValueError):
    """The datagram is not a DHCP request this server can read."""


@dataclass(frozen=True, slots=True)
class DhcpRequest:
    """The parts of a client's message a reply is built from."""

    message_type: int
    xid: int
    flags: int
    ciaddr: ipaddress.IPv4Address
    giaddr: ipaddress.IPv4Address
    #: The client's hardware address (6 octets, Ethernet).
    chaddr: bytes

    @property
    def wants_broadcast(self) -> bool:
        """The client set the BROADCAST flag (it cannot take unicast before it has an IP)."""
        return bool(self.flags & _BROADCAST_FLAG)

    @property
    def mac(self) -> str:
        """``chaddr`` as a lower-case colon-separated MAC."""
        return ":".join(f"{octet:02x}" for octet in self.chaddr)


def parse_request(data: bytes) -> DhcpRequest:
    """The request in ``data``; raises MalformedPacketError for anything else.

    A BOOTREPLY, a non-Ethernet hardware type, a bad magic cookie, an option that runs
    past the end, or a missing/odd message type (option 53) are all malformed here.
    """
    if len(data) < _FIXED:
        raise MalformedPacketError(f"{len(data)} bytes is shorter than a DHCP header")
    op, htype, hlen, _hops, xid, _secs, flags, ciaddr, _yi, _si, giaddr, chaddr, _sn, _fi = (
        _HEADER.unpack_from(data)
    )
    if op != _BOOTREQUEST:
        raise MalformedPacketError(f"op {op} is not BOOTREQUEST")
    if htype != _HTYPE_ETHERNET or hlen != 6:
        raise MalformedPacketError(f"hardware type {htype}/length {hlen} is not Ethernet")
    if data[_HEADER.size : _FIXED] != MAGIC_COOKIE:
        raise MalformedPacketError("bad magic cookie")
    options = _parse_options(data, _FIXED)
    kind = options.get(Option.MESSAGE_TYPE)
    if kind is None or len(kind) != 1:
        raise MalformedPacketError("no single-octet message type (option 53)")
    return DhcpRequest(
        message_type=kind[0],
        xid=xid,
        flags=flags,
        ciaddr=ipaddress.IPv4Address(ciaddr),
        giaddr=ipaddress.IPv4Address(giaddr),
        chaddr=chaddr[:6],
    )


def _parse_options(data: bytes, start: int) -> dict[int, bytes]:
    # One pass, always forward: every step moves at least one octet, so it ends.
    found: dict[int, bytes] = {}
    at = start
    while at < len(data):
        code = data[at]
        if code == _END:
            return found
        if code == _PAD:
            at += 1
            continue
        if at + 1 >= len(data):
            raise MalformedPacketError(f"option {code} has no length octet")
        length = data[at + 1]
        end = at + 2 + length
        if end > len(data):
            raise MalformedPacketError(f"option {code} runs {end - len(data)} octets past the end")
        # RFC 3396: repeated instances of one option are concatenated.
        found[code] = found.get(code, b"") + data[at + 2 : end]
        at = end
    raise MalformedPacketError("options end without the END option")


def encode_reply(
    request: DhcpRequest,
    message_type: MessageType,
    your_ip: ipaddress.IPv4Address,
    options: Iterable[tuple[int, bytes]],
) -> bytes:
    """A BOOTREPLY to ``request`` giving ``your_ip`` and ``options`` in order.

    The message type goes first; values longer than 255 octets are split into several
    instances of the option (RFC 3396). Padded to the BOOTP minimum size.
    """
    header = _HEADER.pack(
        _BOOTREPLY,
        _HTYPE_ETHERNET,
        6,
        0,
        request.xid,
        0,
        request.flags,
        bytes(4),
        your_ip.packed,
        bytes(4),
        request.giaddr.packed,
        request.chaddr.ljust(16, b"\0"),
        bytes(64),
        bytes(128),
    )
    body = bytearray(header + MAGIC_COOKIE)
    for code, value in ((int(Option.MESSAGE_TYPE), bytes([message_type])), *options):
        if not 0 < code < _END:
            raise ValueError(f"option code {code} is outside 1..254")
        chunks = [value[i : i + 255] for i in range(0, len(value), 255)] or [b""]
        for chunk in chunks:
            body += bytes([code, len(chunk)]) + chunk
    body.append(_END)
    if len(body) < MIN_REPLY_SIZE:
        body += bytes(MIN_REPLY_SIZE - len(body))
    return bytes(body)
