"""The handler side of virt-api's relay: VMI commands and console/VNC websockets.

Served over HTTPS with mutual TLS on port 8186 (virt-api's client certificate, signed
by the CA given with --client-ca). Paths as services/virt-api/README.md fixes them:
PUT `/v1/namespaces/{ns}/virtualmachineinstances/{name}/{action}` (`freeze` with upstream's
body {"unfreezeTimeout": "5m"}, which virt-api checked), GET `…/guestosinfo`, `…/userlist`, `…/filesystemlist`
(the guest agent's report in upstream's shapes, `guestagent.py`),
GET (websocket) `…/console` and `…/vnc`: raw bytes in binary frames, relayed to the
launcher's serial and VNC unix sockets (reached without following symlinks; the socket
is pinned before the connect, so one swapped for a symlink is not followed either).
GET (websocket) `…/portforward/{port}[/{tcp|udp}]`: a port of the guest (`portforward.py`);
a port that cannot be reached ends the websocket with code 1011 and the reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import re
import stat
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from aiohttp import WSCloseCode, WSMsgType, web
from kubevirt_api.durations import DurationError, parse_duration
from service_kit import get_logger, pump_until_either_ends
from virt_rpc import GuestInfo, PinnedSocket

from .guestagent import filesystem_list, guest_agent_info, user_list
from .network import NetworkSetupError, find_pod_netns
from .podfiles import SERIAL_LOG, SERIAL_SOCKET, VNC_SOCKET, PodFiles, PodUid
from .portforward import (
    PROTOCOLS,
    PortForwardError,
    forward_target,
    open_guest_port,
    relay_datagrams,
)
from .safepath import PathRefusedError, PinnedDir
from .screenshot import ScreenshotError, take_screenshot
from .vmi_sync import CommandError, GuestRecord, VmiSync

__all__ = ["RELAY_COMMANDS", "relay_routes"]

# virt-api's command names -> ours.
RELAY_COMMANDS = {
    "pause": "pause",
    "unpause": "unpause",
    "softreboot": "softreboot",
    "reset": "reset",
}
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
_BUFFER = 64 * 1024
_HISTORY = 16 * 1024
_log = get_logger(__name__)


def _coordinates(request: web.Request) -> tuple[str, str]:
    namespace, name = request.match_info["namespace"], request.match_info["name"]
    for what, value in (("namespace", namespace), ("name", name)):
        if not _NAME.match(value):
            raise web.HTTPBadRequest(text=f"{what}: {value!r} is not a valid Kubernetes name")
    return namespace, name


def _launcher_of(
    sync: VmiSync, namespace: str, name: str
) -> tuple[GuestRecord, PodUid] | web.Response:
    """The VMI's record and launcher pod when it is known, else the answer to give."""
    try:
        record = sync.record_for(namespace, name)
    except CommandError as error:
        return web.Response(status=error.status, text=error.message)
    if record.pod is None:
        return web.Response(status=409, text="the VMI has no launcher yet")
    return record, record.pod


def relay_routes(sync: VmiSync, files: PodFiles) -> list[web.RouteDef]:
    """The routes of the relay server, bound to one VmiSync."""

    async def command(request: web.Request) -> web.Response:
        namespace, name = _coordinates(request)
        action = request.match_info["action"]
        if action in ("freeze", "unfreeze"):
            return await freeze(request, namespace, name, action)
        if action not in RELAY_COMMANDS:
            raise web.HTTPNotFound(text=f"unknown command {action!r}")
        try:
            await sync.command(namespace, name, RELAY_COMMANDS[action])
        except CommandError as error:
            return web.Response(status=error.status, text=error.message)
        return web.json_response({})

    async def freeze(request: web.Request, namespace: str, name: str, action: str) -> web.Response:
        timeout: int | None = None
        if action == "freeze":
            try:
                body = await request.json()
            except ValueError:
                body = None
            text = body.get("unfreezeTimeout") if isinstance(body, dict) else None
            try:
                seconds = parse_duration(text) if isinstance(text, str) else -1.0
            except DurationError:
                seconds = -1.0
            if seconds < 0:
                return web.Response(status=400, text="unfreezeTimeout: a duration such as 5m")
            timeout = math.ceil(seconds)
        try:
            await sync.freeze(namespace, name, timeout)
        except CommandError as error:
            return web.Response(status=error.status, text=error.message)
        return web.json_response({})

    def agent_report(
        shape: Callable[[GuestInfo], Mapping[str, Any]],
    ) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handler(request: web.Request) -> web.Response:
            namespace, name = _coordinates(request)
            try:
                return web.json_response(shape(await sync.guest_info(namespace, name)))
            except CommandError as error:
                return web.Response(status=error.status, text=error.message)

        return handler

    async def open_guest_socket(
        request: web.Request, socket_name: str
    ) -> web.Response | tuple[PinnedDir, asyncio.StreamReader, asyncio.StreamWriter]:
        """Connect the VMI's guest socket (serial, VNC) without following a symlink."""
        namespace, name = _coordinates(request)
        found = _launcher_of(sync, namespace, name)
        if isinstance(found, web.Response):
            return found
        record, pod = found
        try:
            pinned = await asyncio.to_thread(files.guest_dir, pod, record.identity.uid)
        except (PathRefusedError, FileNotFoundError) as error:
            _log.error("refusing a guest socket", socket=socket_name, name=name, error=str(error))
            return web.Response(status=409, text=str(error))
        try:
            sock: PinnedSocket = await asyncio.to_thread(pinned.socket, socket_name)
            try:
                reader, writer = await asyncio.open_unix_connection(sock.path, limit=_BUFFER)
            finally:
                sock.close()
        except (PathRefusedError, OSError) as error:
            pinned.close()
            _log.error(
                "cannot open a guest socket", socket=socket_name, name=name, error=str(error)
            )
            return web.Response(status=409, text=f"{socket_name}: {error}")
        return pinned, reader, writer

    async def screenshot(request: web.Request) -> web.Response:
        opened = await open_guest_socket(request, VNC_SOCKET)
        if isinstance(opened, web.Response):
            return opened
        pinned, reader, writer = opened
        try:
            png = await take_screenshot(
                reader, writer, move_cursor=request.query.get("moveCursor") == "true"
            )
        except ScreenshotError as error:
            return web.Response(status=502, text=f"screenshot: {error}")
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
            pinned.close()
        return web.Response(body=png, content_type="image/png")

    def stream(socket_name: str) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        async def handler(request: web.Request) -> web.StreamResponse:
            opened = await open_guest_socket(request, socket_name)
            if isinstance(opened, web.Response):
                return opened
            pinned, reader, writer = opened
            try:
                ws = web.WebSocketResponse(max_msg_size=_BUFFER * 4)
                await ws.prepare(request)
                if socket_name == SERIAL_SOCKET:
                    # The serial socket drops output while nobody listens; its log kept it.
                    history = await asyncio.to_thread(_log_tail, pinned, SERIAL_LOG)
                    if history:
                        await ws.send_bytes(history)
                await _pump(ws, reader, writer)
            finally:
                # Also when prepare fails (not a websocket request, client gone).
                writer.close()
                with contextlib.suppress(Exception):
                    await writer.wait_closed()
                pinned.close()
            return ws

        return handler

    async def portforward(request: web.Request) -> web.StreamResponse:
        namespace, name = _coordinates(request)
        port_text = request.match_info["port"]
        protocol = request.match_info.get("protocol", "tcp")
        port = int(port_text) if port_text.isdigit() and len(port_text) <= 5 else 0
        if not 1 <= port <= 65535:
            return web.Response(status=400, text=f"port {port_text!r} is not within 1-65535")
        if protocol not in PROTOCOLS:
            return web.Response(status=400, text=f"protocol {protocol!r}: use tcp or udp")
        found = _launcher_of(sync, namespace, name)
        if isinstance(found, web.Response):
            return found
        _, pod = found
        ws = web.WebSocketResponse(max_msg_size=_BUFFER * 4)
        await ws.prepare(request)
        try:
            target = forward_target(sync.vmis.get_raw(f"{namespace}/{name}") or {})
            netns = await asyncio.to_thread(find_pod_netns, pod) if target.in_pod else None
            sock = await open_guest_port(target, port, protocol, netns)
        except (PortForwardError, NetworkSetupError) as error:
            _log.info("port-forward ended", namespace=namespace, name=name, error=str(error))
            await ws.close(code=WSCloseCode.INTERNAL_ERROR, message=str(error).encode()[:120])
            return ws
        if protocol == "udp":
            try:
                await relay_datagrams(ws, sock)
            finally:
                sock.close()
            return ws
        reader, writer = await asyncio.open_connection(sock=sock, limit=_BUFFER)
        try:
            await _pump(ws, reader, writer)
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
        return ws

    prefix = "/v1/namespaces/{namespace}/virtualmachineinstances/{name}"
    return [
        web.get(prefix + "/portforward/{port}", portforward),
        web.get(prefix + "/portforward/{port}/{protocol}", portforward),
        web.get(prefix + "/console", stream(SERIAL_SOCKET)),
        web.get(prefix + "/vnc", stream(VNC_SOCKET)),
        web.get(prefix + "/vnc/screenshot", screenshot),
        web.get(prefix + "/guestosinfo", agent_report(guest_agent_info)),
        web.get(prefix + "/userlist", agent_report(user_list)),
        web.get(prefix + "/filesystemlist", agent_report(filesystem_list)),
        web.put(prefix + "/{action}", command),
    ]


def _log_tail(pinned: PinnedDir, name: str) -> bytes:
    """The last _HISTORY bytes of a log in the guest dir (never through a symlink)."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=pinned.fd)
    except OSError:
        return b""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return b""
        size = os.fstat(fd).st_size
        os.lseek(fd, max(0, size - _HISTORY), os.SEEK_SET)
        return os.read(fd, _HISTORY)
    finally:
        os.close(fd)


async def _pump(
    ws: web.WebSocketResponse, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    """Copy bytes both ways until either side closes."""

    async def to_client() -> None:
        while True:
            data = await reader.read(_BUFFER)
            if not data:
                return
            await ws.send_bytes(data)

    async def to_guest() -> None:
        async for message in ws:
            if message.type is WSMsgType.BINARY:
                writer.write(message.data)
            elif message.type is WSMsgType.TEXT:
                writer.write(str(message.data).encode())
            else:
                return
            await writer.drain()

    try:
        await pump_until_either_ends(to_client(), to_guest())
    finally:
        await ws.close()
