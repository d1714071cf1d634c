"""The handler's end of `virtctl port-forward`: a connection to a port of the guest.

Masquerade binding: the pod's nftables `output` chain DNATs 127.0.0.1:<port> to the guest
(upstream's ruleset, set up in phase 1), so the handler connects to 127.0.0.1:<port> from
a socket *created* inside the launcher pod's netns. A socket keeps the netns it was made
in, so only its creation happens in a short-lived thread that joined the netns; the
connect and all traffic then run on the event loop. Bridge binding: the guest holds the
pod's IP, reachable from the node as any pod IP is, so the handler dials that IP from its
own netns (upstream's virt-api dials `status.interfaces[0].ipAddress` the same way).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import socket
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import WSMsgType, web
from service_kit import pump_until_either_ends

__all__ = [
    "PROTOCOLS",
    "ForwardTarget",
    "PortForwardError",
    "forward_target",
    "open_guest_port",
    "relay_datagrams",
    "socket_in_netns",
]

PROTOCOLS = ("tcp", "udp")
LOOPBACK = "127.0.0.1"
_CONNECT_TIMEOUT = 10.0
_DATAGRAM = 65535
_LIBC = ctypes.CDLL(None, use_errno=True)
_CLONE_NEWNET = 0x40000000


class PortForwardError(Exception):
    """The guest's port cannot be reached; the message is fit for the user."""


@dataclass(frozen=True, slots=True)
class ForwardTarget:
    """Where to connect: `host` from inside the pod's netns (`in_pod`) or from here."""

    host: str
    in_pod: bool


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def forward_target(vmi: Mapping[str, Any]) -> ForwardTarget:
    """The target for the VMI's primary pod-network interface (masquerade unless bridge)."""
    spec = _map(vmi.get("spec"))
    pod_networks = [_map(n).get("name") for n in spec.get("networks") or () if "pod" in _map(n)]
    interfaces = [
        _map(i) for i in _map(_map(spec.get("domain")).get("devices")).get("interfaces") or ()
    ]
    primary = next((i for i in interfaces if i.get("name") in pod_networks), None)
    if primary is None or "bridge" not in primary:
        return ForwardTarget(LOOPBACK, in_pod=True)
    statuses = [_map(s) for s in _map(vmi.get("status")).get("interfaces") or ()]
    ip = next((s.get("ipAddress") for s in statuses if s.get("name") == primary.get("name")), None)
    if not isinstance(ip, str) or not ip:
        raise PortForwardError("the VMI reports no pod IP yet (bridge binding)")
    return ForwardTarget(ip, in_pod=False)


def socket_in_netns(netns: str, family: int, kind: int) -> socket.socket:
    """A non-blocking socket that lives in the network namespace at `netns` (a path).

    A fresh thread joins the namespace (a netns is per thread), makes the socket and ends,
    so no thread of the handler stays in a pod's namespace. Raises OSError.
    """
    made: list[socket.socket] = []
    failure: list[OSError] = []

    def work() -> None:
        try:
            fd = os.open(netns, os.O_RDONLY | os.O_CLOEXEC)
            try:
                if _LIBC.setns(fd, _CLONE_NEWNET) != 0:
                    error = ctypes.get_errno()
                    raise OSError(error, f"setns({netns}): {os.strerror(error)}")
            finally:
                os.close(fd)
            made.append(socket.socket(family, kind))
        except OSError as error:
            failure.append(error)

    thread = threading.Thread(target=work, name="portforward-netns")
    thread.start()
    thread.join()
    if failure:
        raise failure[0]
    made[0].setblocking(False)
    return made[0]


async def open_guest_port(
    target: ForwardTarget,
    port: int,
    protocol: str,
    netns: str | None,
) -> socket.socket:
    """A connected non-blocking socket to the guest's `port`; PortForwardError if refused."""
    kind = socket.SOCK_STREAM if protocol == "tcp" else socket.SOCK_DGRAM
    family = socket.AF_INET6 if ":" in target.host else socket.AF_INET
    where = f"{protocol} {target.host}:{port}" + (" in the pod" if target.in_pod else "")
    try:
        if target.in_pod:
            if netns is None:
                raise PortForwardError("the pod's network namespace is unknown")
            sock = await asyncio.to_thread(socket_in_netns, netns, family, kind)
        else:
            sock = socket.socket(family, kind)
            sock.setblocking(False)
    except OSError as error:
        raise PortForwardError(f"dialing {where}: {error.strerror or error}") from error
    try:
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(_CONNECT_TIMEOUT):
            await loop.sock_connect(sock, (target.host, port))
    except TimeoutError as error:
        sock.close()
        raise PortForwardError(
            f"dialing {where}: no answer within {_CONNECT_TIMEOUT:g}s"
        ) from error
    except OSError as error:
        sock.close()
        reason = os.strerror(error.errno) if error.errno else str(error)
        raise PortForwardError(f"dialing {where}: {reason}") from error
    return sock


async def relay_datagrams(ws: web.WebSocketResponse, sock: socket.socket) -> None:
    """UDP: one binary message is one datagram, both ways, until the client closes."""
    loop = asyncio.get_running_loop()

    async def to_client() -> None:
        while True:
            try:
                data = await loop.sock_recv(sock, _DATAGRAM)
            except ConnectionRefusedError:
                continue  # an ICMP "port unreachable" for an earlier datagram
            await ws.send_bytes(data)

    async def to_guest() -> None:
        async for message in ws:
            if message.type is WSMsgType.BINARY:
                with contextlib.suppress(ConnectionRefusedError):  # nobody listens yet
                    await loop.sock_sendall(sock, message.data)
            elif message.type is not WSMsgType.TEXT:
                return

    try:
        await pump_until_either_ends(to_client(), to_guest())
    finally:
        await ws.close()
