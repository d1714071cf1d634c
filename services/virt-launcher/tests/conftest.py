"""Fixtures of the launcher's unit tests."""

from __future__ import annotations

import struct
from collections.abc import Callable

import pytest
from virt_launcher.dhcp.packet import MAGIC_COOKIE

__all__: list[str] = []

#: Builds a client's DHCP datagram (see ``dhcp_frame``).
DhcpFrame = Callable[..., bytes]

MAC = bytes.fromhex("020000aabb01")


def _request(
    message_type: int = 1,
    *,
    op: int = 1,
    htype: int = 1,
    hlen: int = 6,
    cookie: bytes = MAGIC_COOKIE,
    options: bytes | None = None,
    flags: int = 0,
) -> bytes:
    header = struct.pack(
        "!BBBBIHH4s4s4s4s16s64s128s",
        op,
        htype,
        hlen,
        0,
        0xDEADBEEF,
        0,
        flags,
        bytes(4),
        bytes(4),
        bytes(4),
        bytes(4),
        MAC.ljust(16, b"\0"),
        bytes(64),
        bytes(128),
    )
    body = options if options is not None else bytes([53, 1, message_type, 255])
    return header + cookie + body


@pytest.fixture
def dhcp_frame() -> DhcpFrame:
    """A client datagram: ``dhcp_frame(message_type, op=, htype=, hlen=, cookie=, options=, flags=)``;
    client MAC 02:00:00:aa:bb:01, xid 0xdeadbeef."""
    return _request
