"""DHCP messages: requests are read defensively, replies are well formed."""

from __future__ import annotations

import contextlib
import ipaddress
import random
import struct
from collections.abc import Callable
from typing import Any

import pytest
from virt_launcher.dhcp.packet import (
    MAGIC_COOKIE,
    MIN_REPLY_SIZE,
    MalformedPacketError,
    MessageType,
    encode_reply,
    parse_request,
)

#: Builds a client datagram (the ``dhcp_frame`` fixture in conftest.py).
DhcpFrame = Callable[..., bytes]


def test_a_discover_is_read(dhcp_frame: DhcpFrame) -> None:
    parsed = parse_request(dhcp_frame(1, flags=0x8000))
    assert parsed.message_type == MessageType.DISCOVER
    assert parsed.xid == 0xDEADBEEF
    assert parsed.mac == "02:00:00:aa:bb:01"
    assert parsed.wants_broadcast


@pytest.mark.parametrize(
    ("fields", "cut", "reason"),
    [
        ({}, 0, "shorter than a DHCP header"),
        ({}, 239, "shorter than a DHCP header"),
        ({"op": 2}, None, "not BOOTREQUEST"),
        ({"htype": 6}, None, "not Ethernet"),
        ({"hlen": 16}, None, "not Ethernet"),
        ({"cookie": b"\x63\x82\x53\x00"}, None, "magic cookie"),
        ({"options": bytes([53, 5, 1, 255])}, None, "past the end"),
        ({"options": bytes([12, 200]) + b"x" * 10}, None, "past the end"),
        ({"options": bytes([53])}, None, "no length octet"),
        ({"options": bytes([53, 1, 1])}, None, "without the END"),
        ({"options": bytes([0] * 50)}, None, "without the END"),
        ({"options": bytes([255])}, None, "message type"),
        ({"options": bytes([53, 2, 1, 1, 255])}, None, "message type"),
        # An option overload pointing at sname/file is not followed: no loop, no type.
        ({"options": bytes([52, 1, 3, 255])}, None, "message type"),
    ],
)
def test_bad_datagrams_are_malformed_never_a_crash(
    dhcp_frame: DhcpFrame, fields: dict[str, Any], cut: int | None, reason: str
) -> None:

    with pytest.raises(MalformedPacketError, match=reason):
        parse_request(dhcp_frame(**fields)[:cut])


def test_random_bytes_never_raise_anything_but_malformed(dhcp_frame: DhcpFrame) -> None:
    rng = random.Random(14)
    valid = dhcp_frame(3)
    for _ in range(3000):
        data = bytearray(valid)
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        data = data[: rng.randint(0, len(data))]
        with contextlib.suppress(MalformedPacketError):
            parse_request(bytes(data))


def test_repeated_options_are_concatenated(dhcp_frame: DhcpFrame) -> None:
    parsed = parse_request(dhcp_frame(options=bytes([53, 0, 53, 1, 3, 255])))
    assert parsed.message_type == MessageType.REQUEST


def test_a_reply_echoes_the_request_and_carries_the_options_in_order(
    dhcp_frame: DhcpFrame,
) -> None:
    req = parse_request(dhcp_frame(1, flags=0x8000))
    long_value = b"v" * 300
    data = encode_reply(
        req,
        MessageType.OFFER,
        ipaddress.IPv4Address("10.0.2.2"),
        [(224, long_value), (26, b"\x05\xdc")],
    )
    assert len(data) >= MIN_REPLY_SIZE
    op, htype, hlen, _, xid, _, flags = struct.unpack_from("!BBBBIHH", data)
    assert (op, htype, hlen, xid, flags) == (2, 1, 6, 0xDEADBEEF, 0x8000)
    assert data[16:20] == ipaddress.IPv4Address("10.0.2.2").packed
    assert data[28:34] == bytes.fromhex("020000aabb01")
    assert data[236:240] == MAGIC_COOKIE
    options = data[240:]
    assert options[:3] == bytes([53, 1, MessageType.OFFER])
    # 300 octets become two instances (RFC 3396): 255 + 45.
    assert options[3:5] == bytes([224, 255])
    assert options[5 + 255 : 5 + 257] == bytes([224, 45])
    rest = options[5 + 257 + 45 :]
    assert rest[:5] == bytes([26, 2, 5, 220, 255])
