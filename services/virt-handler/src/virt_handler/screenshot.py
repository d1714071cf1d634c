"""A PNG of the guest's screen, taken over its VNC socket (what `vnc/screenshot` returns).

As upstream's handler does, this speaks RFB to QEMU's VNC server in the launcher pod:
version 3.8, security None, one full framebuffer request in Raw encoding at 32 bits per
pixel, then the pixels are written as a PNG (zlib, no imaging library). The socket is in
a directory the pod can write, so the server is not trusted: every length is bounded and
every read has a deadline.
"""

from __future__ import annotations

import asyncio
import struct
import zlib

__all__ = ["MAX_PIXELS", "ScreenshotError", "encode_png", "take_screenshot"]

#: Larger screens are refused (a 4K screen is 8.3 M pixels).
MAX_PIXELS = 16 * 1024 * 1024
_VERSION = b"RFB 003.008\n"
_SECURITY_NONE = 1
_RAW = 0
# 32 bpp, depth 24, little-endian, true colour, 8 bits per channel: red<<16 green<<8 blue.
_PIXEL_FORMAT = struct.pack(">BBBBHHHBBB3x", 32, 24, 0, 1, 255, 255, 255, 16, 8, 0)
_MAX_TEXT = 64 * 1024


class ScreenshotError(Exception):
    """The VNC server did not give a screen (refused, bad protocol, too large, too slow)."""


async def _exactly(reader: asyncio.StreamReader, size: int) -> bytes:
    try:
        return await reader.readexactly(size)
    except asyncio.IncompleteReadError as error:
        raise ScreenshotError("the VNC server closed the connection") from error


async def _skip_text(reader: asyncio.StreamReader) -> bytes:
    (length,) = struct.unpack(">I", await _exactly(reader, 4))
    if length > _MAX_TEXT:
        raise ScreenshotError(f"the VNC server sent a {length}-byte text")
    return await _exactly(reader, length)


async def _handshake(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> tuple[int, int]:
    version = await _exactly(reader, 12)
    if not version.startswith(b"RFB 003."):
        raise ScreenshotError(f"not a VNC server (greeting {version!r})")
    writer.write(_VERSION)
    (count,) = await _exactly(reader, 1)
    if count == 0:
        reason = await _skip_text(reader)
        raise ScreenshotError(f"the VNC server refused: {reason.decode(errors='replace')}")
    if _SECURITY_NONE not in await _exactly(reader, count):
        raise ScreenshotError("the VNC server wants authentication")
    writer.write(bytes([_SECURITY_NONE]))
    (result,) = struct.unpack(">I", await _exactly(reader, 4))
    if result != 0:
        raise ScreenshotError("the VNC server refused the connection")
    writer.write(b"\x01")  # ClientInit: share the desktop with other viewers
    width, height = struct.unpack(">HH", await _exactly(reader, 4))
    await _exactly(reader, 16)  # the server's pixel format: we set our own
    await _skip_text(reader)  # the desktop name
    if width * height > MAX_PIXELS or width == 0 or height == 0:
        raise ScreenshotError(f"the screen is {width}x{height}; at most {MAX_PIXELS} pixels")
    return width, height


async def _framebuffer(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, width: int, height: int
) -> bytearray:
    """Request the whole screen once; its pixels as 4-byte BGRX, row by row."""
    writer.write(b"\x00\x00\x00\x00" + _PIXEL_FORMAT)  # SetPixelFormat
    writer.write(struct.pack(">BxHi", 2, 1, _RAW))  # SetEncodings: Raw only
    writer.write(struct.pack(">BBHHHH", 3, 0, 0, 0, width, height))  # full update request
    await writer.drain()
    screen = bytearray(width * height * 4)
    while True:
        (kind,) = await _exactly(reader, 1)
        if kind == 0:
            break
        if kind == 1:  # SetColourMapEntries (not for true colour, but allowed)
            _, count = struct.unpack(">xHH", await _exactly(reader, 5))
            await _exactly(reader, 6 * count)
        elif kind == 2:  # Bell
            continue
        elif kind == 3:  # ServerCutText
            await _exactly(reader, 3)
            await _skip_text(reader)
        else:
            raise ScreenshotError(f"unexpected VNC message type {kind}")
    (rects,) = struct.unpack(">xH", await _exactly(reader, 3))
    for _ in range(rects):
        x, y, w, h, encoding = struct.unpack(">HHHHi", await _exactly(reader, 12))
        if encoding != _RAW:
            raise ScreenshotError(f"the VNC server sent encoding {encoding}, not Raw")
        if x + w > width or y + h > height:
            raise ScreenshotError("the VNC server sent a rectangle outside the screen")
        row = w * 4
        for line in range(y, y + h):
            start = (line * width + x) * 4
            screen[start : start + row] = await _exactly(reader, row)
    return screen


def encode_png(width: int, height: int, bgrx: bytes) -> bytes:
    """An RGB PNG of `width` x `height` pixels given as 4-byte little-endian 0RGB words."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    raw = bytearray()
    stride = width * 4
    for line in range(height):
        row = bgrx[line * stride : (line + 1) * stride]
        raw.append(0)  # filter: none
        rgb = bytearray(width * 3)
        rgb[0::3] = row[2::4]
        rgb[1::3] = row[1::4]
        rgb[2::3] = row[0::4]
        raw += rgb
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(bytes(raw), 6))
        + chunk(b"IEND", b"")
    )


async def take_screenshot(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    *,
    move_cursor: bool = False,
    within: float = 20.0,
) -> bytes:
    """Speak RFB on an open connection to the guest's VNC server; the screen as PNG.

    Raises ScreenshotError when the server misbehaves or gives no screen `within` seconds.
    """

    async def take() -> bytes:
        width, height = await _handshake(reader, writer)
        if move_cursor:
            # Wake a screensaver: the pointer moves and comes back (upstream's --move-cursor).
            writer.write(struct.pack(">BBHH", 5, 0, 1, 1) + struct.pack(">BBHH", 5, 0, 0, 0))
        screen = await _framebuffer(reader, writer, width, height)
        return await asyncio.to_thread(encode_png, width, height, bytes(screen))

    try:
        return await asyncio.wait_for(take(), within)
    except TimeoutError as error:
        raise ScreenshotError(f"no screen from the VNC server within {within:g}s") from error
