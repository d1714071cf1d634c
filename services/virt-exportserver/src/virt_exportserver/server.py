"""The export's HTTP surface: each volume as `disk.img` (raw) and `disk.img.gz` (gzip),
for requests carrying the token; `/exportready` for the kubelet's readiness probe.

Only the URL paths the pod's environment lists are served, matched whole, so a request
path never becomes a file path. Reads and compression run in worker threads, a chunk at a
time: the event loop never blocks and no image is held in memory.
"""

from __future__ import annotations

import asyncio
import hmac
import os
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from aiohttp import web
from kubevirt_api import exports as ex
from service_kit import get_logger

from .volumes import Volume, open_image

__all__ = ["CHUNK", "build_app"]

log = get_logger(__name__)

#: Bytes per read: large enough to keep the disk busy, small enough to bound memory.
CHUNK = 1 << 20
GZIP_LEVEL = 6


@dataclass(frozen=True, slots=True)
class _Route:
    volume: Volume
    gzip: bool


def _authorised(request: web.Request, token: str) -> bool:
    offered = request.headers.get(ex.TOKEN_HEADER) or request.query.get(ex.TOKEN_QUERY) or ""
    return bool(token) and hmac.compare_digest(offered.encode(), token.encode())


async def _send_raw(response: web.StreamResponse, fd: int) -> None:
    offset = 0
    while True:
        chunk = await asyncio.to_thread(os.pread, fd, CHUNK, offset)
        if not chunk:
            return
        offset += len(chunk)
        await response.write(chunk)


async def _send_gzip(response: web.StreamResponse, fd: int) -> None:
    compressor = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 31)  # 31: a gzip member
    offset = 0

    def step(at: int) -> tuple[int, bytes]:
        chunk = os.pread(fd, CHUNK, at)
        if not chunk:
            return 0, compressor.flush()
        return len(chunk), compressor.compress(chunk)

    while True:
        read, data = await asyncio.to_thread(step, offset)
        if data:
            await response.write(data)
        if not read:
            return
        offset += read


def build_app(volumes: Sequence[Volume], token: Callable[[], str]) -> web.Application:
    """The server's routes over `volumes`; `token()` gives the token a request must carry."""
    routes: dict[str, _Route] = {}
    for volume in volumes:
        routes[volume.raw_uri] = _Route(volume, gzip=False)
        routes[volume.gzip_uri] = _Route(volume, gzip=True)

    async def ready(_request: web.Request) -> web.Response:
        return web.Response(text="OK")

    async def serve(request: web.Request) -> web.StreamResponse:
        route = routes.get(request.path)
        if route is None:
            raise web.HTTPNotFound(text=f"{request.path}: no such export path\n")
        if not _authorised(request, token()):
            raise web.HTTPUnauthorized(text=f"missing or wrong {ex.TOKEN_HEADER}\n")
        try:
            fd, size = await asyncio.to_thread(open_image, route.volume)
        except FileNotFoundError:
            raise web.HTTPNotFound(text=f"{route.volume.name}: no disk image\n") from None
        except PermissionError as exc:
            log.warning("refused an image outside the rules", error=str(exc))
            raise web.HTTPForbidden(text=f"{route.volume.name}: refused\n") from None
        try:
            response = web.StreamResponse()
            if route.gzip:
                response.content_type = "application/gzip"
                response.enable_chunked_encoding()
            else:
                response.content_type = "application/octet-stream"
                response.content_length = size
            await response.prepare(request)
            await (_send_gzip if route.gzip else _send_raw)(response, fd)
            await response.write_eof()
            return response
        finally:
            os.close(fd)

    app = web.Application()
    app.router.add_get(ex.READINESS_PATH, ready)
    app.router.add_get("/{tail:.*}", serve, allow_head=False)
    return app
