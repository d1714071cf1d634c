"""vnc/screenshot: RFB against a VNC server on a socket, the screen back as a PNG."""

from __future__ import annotations

import asyncio
import struct
import zlib
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from virt_handler.screenshot import MAX_PIXELS, ScreenshotError, take_screenshot

Script = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def _server_init(width: int, height: int) -> bytes:
    return struct.pack(">HH", width, height) + bytes(16) + struct.pack(">I", 4) + b"test"


def _qemu_like(
    width: int, height: int, pixel: Callable[[int, int], tuple[int, int, int]]
) -> Script:
    """A VNC server as QEMU's answers a viewer: no auth, one Raw update of the screen."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"RFB 003.008\n")
        assert await reader.readexactly(12) == b"RFB 003.008\n"
        writer.write(b"\x01\x01")
        assert await reader.readexactly(1) == b"\x01"
        writer.write(struct.pack(">I", 0))
        assert await reader.readexactly(1) == b"\x01"
        writer.write(_server_init(width, height))
        await reader.readexactly(20)  # SetPixelFormat
        await reader.readexactly(8)  # SetEncodings
        request = await reader.readexactly(10)
        assert struct.unpack(">BBHHHH", request) == (3, 0, 0, 0, width, height)
        writer.write(b"\x02")  # a Bell first, which the client skips
        writer.write(struct.pack(">BxH", 0, 1) + struct.pack(">HHHHi", 0, 0, width, height, 0))
        for y in range(height):
            for x in range(width):
                r, g, b = pixel(x, y)
                writer.write(bytes([b, g, r, 0]))
        await writer.drain()
        await reader.read()

    return serve


async def _shoot(tmp_path: Path, script: Script) -> bytes:
    path = tmp_path / "vnc"
    server = await asyncio.start_unix_server(script, path=str(path))
    try:
        reader, writer = await asyncio.open_unix_connection(str(path))
        try:
            return await take_screenshot(reader, writer, within=5)
        finally:
            writer.close()
    finally:
        server.close()


def _decode_rgb(png: bytes) -> tuple[int, int, bytes]:
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    pos, width, height, data = 8, 0, 0, b""
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos : pos + 4])
        kind, body = png[pos + 4 : pos + 8], png[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack(">I", png[pos + 8 + length : pos + 12 + length])
        assert crc == zlib.crc32(kind + body)
        if kind == b"IHDR":
            width, height = struct.unpack(">II", body[:8])
            assert body[8:10] == b"\x08\x02"  # 8-bit RGB
        elif kind == b"IDAT":
            data += body
        pos += 12 + length
    raw = zlib.decompress(data)
    rows = [raw[i * (width * 3 + 1) : (i + 1) * (width * 3 + 1)] for i in range(height)]
    assert all(row[0] == 0 for row in rows)
    return width, height, b"".join(row[1:] for row in rows)


async def test_the_screen_comes_back_as_the_png_of_its_pixels(tmp_path: Path) -> None:
    def pixel(x: int, y: int) -> tuple[int, int, int]:
        return (x * 40, y * 100, 7)

    png = await _shoot(tmp_path, _qemu_like(5, 2, pixel))
    width, height, rgb = _decode_rgb(png)
    assert (width, height) == (5, 2)
    expected = b"".join(bytes(pixel(x, y)) for y in range(2) for x in range(5))
    assert rgb == expected


async def test_a_server_wanting_a_password_is_refused(tmp_path: Path) -> None:
    async def vnc_auth(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"RFB 003.008\n")
        await reader.readexactly(12)
        writer.write(b"\x01\x02")  # VNC authentication only
        await writer.drain()
        await reader.read()

    with pytest.raises(ScreenshotError, match="wants authentication"):
        await _shoot(tmp_path, vnc_auth)


async def test_an_absurd_screen_size_is_refused_before_reading_it(tmp_path: Path) -> None:
    async def huge(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"RFB 003.008\n")
        await reader.readexactly(12)
        writer.write(b"\x01\x01")
        await reader.readexactly(1)
        writer.write(struct.pack(">I", 0))
        await reader.readexactly(1)
        writer.write(_server_init(65535, 65535))
        await writer.drain()
        await reader.read()

    assert MAX_PIXELS < 65535 * 65535
    with pytest.raises(ScreenshotError, match="at most"):
        await _shoot(tmp_path, huge)


async def test_a_server_that_stalls_times_out(tmp_path: Path) -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()

    path = tmp_path / "vnc"
    server = await asyncio.start_unix_server(silent, path=str(path))
    reader, writer = await asyncio.open_unix_connection(str(path))
    with pytest.raises(ScreenshotError, match=r"within 0\.2s"):
        await take_screenshot(reader, writer, within=0.2)
    writer.close()
    server.close()
