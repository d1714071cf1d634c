"""The handler side of virt-api's relay: VMI commands and console/VNC websockets.

Served over HTTPS with mutual TLS on port 8186 (virt-api's client certificate, signed
by the CA given with --client-ca). Paths as services/virt-api/README.md fixes them:
PUT `/v1/namespaces/{ns}/virtualmachineinstances/{name}/{action}`, GET `…/guestosinfo`,
GET (websocket) `…/console` and `…/vnc`: raw bytes in binary frames, relayed to the
launcher's serial and VNC unix sockets (reached without following symlinks; the socket
is pinned before the connect, so one swapped for a symlink is not followed either).
GET (websocket) `…/portforward/{port}[/{tcp|udp}]`: a port of the guest (`portforward.py`);
a port that cannot be reached ends the websocket with code 1011 and the reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import stat
from collections.abc import Awaitable, Callable

from aiohttp import WSCloseCode, WSMsgType, web
from service_kit import pump_until_either_ends
from virt_rpc import PinnedSocket

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
_log = logging.getLogger(__name__)


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
            raise web.HTTPNotImplemented(text=f"{action}: needs the guest agent, not supported yet")
        if action not in RELAY_COMMANDS:
            raise web.HTTPNotFound(text=f"unknown command {action!r}")
        try:
            await sync.command(namespace, name, RELAY_COMMANDS[action])
        except CommandError as error:
            return web.Response(status=error.status, text=error.message)
        return web.json_response({})

    async def guestosinfo(request: web.Request) -> web.Response:
        namespace, name = _coordinates(request)
        try:
            return web.json_response(await sync.guest_os_info(namespace, name))
        except CommandError as error:
            return web.Response(status=error.status, text=error.message)

    def stream(socket_name: str) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        async def handler(request: web.Request) -> web.StreamResponse:
            namespace, name = _coordinates(request)
            found = _launcher_of(sync, namespace, name)
            if isinstance(found, web.Response):
                return found
            record, pod = found
            try:
                pinned = await asyncio.to_thread(files.guest_dir, pod, record.identity.uid)
            except (PathRefusedError, FileNotFoundError) as error:
                _log.error("refusing the %s of %s: %s", socket_name, name, error)
                return web.Response(status=409, text=str(error))
            try:
                sock: PinnedSocket = await asyncio.to_thread(pinned.socket, socket_name)
                try:
                    reader, writer = await asyncio.open_unix_connection(sock.path, limit=_BUFFER)
                finally:
                    sock.close()
            except (PathRefusedError, OSError) as error:
                pinned.close()
                _log.error("cannot open the %s of %s: %s", socket_name, name, error)
                return web.Response(status=409, text=f"{socket_name}: {error}")
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
            _log.info("port-forward to %s/%s: %s", namespace, name, error)
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
        web.get(prefix + "/guestosinfo", guestosinfo),
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
