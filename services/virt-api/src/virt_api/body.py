"""Reading a request body whole, with a size limit, without trusting Content-Length."""

from __future__ import annotations

from aiohttp import web

__all__ = ["BodyTooLargeError", "read_body"]


class BodyTooLargeError(Exception):
    """The body is larger than the limit."""


async def read_body(request: web.Request, limit: int) -> bytes:
    """All of the body (StreamReader.read(n) returns one chunk, not n bytes)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = await request.content.read(64 * 1024)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > limit:
            raise BodyTooLargeError(f"the body is larger than {limit} bytes")
        chunks.append(chunk)
