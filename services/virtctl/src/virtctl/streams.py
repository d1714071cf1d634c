"""A VMI's console, VNC or guest-port byte stream: a websocket to subresources.kubevirt.io.

The API server proxies the upgrade to virt-api, which relays it to the virt-handler on
the VMI's node, which connects the launcher's serial (or VNC) socket or the guest's port.
Bytes flow both ways in binary frames. A stream the server ends with code 1011 and a
reason (a guest port that refused) raises SubresourceError with that reason.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

import aiohttp

from virtctl.commands.subresource import Cluster, SubresourceError

__all__ = ["StreamEndedError", "relay_stream"]

Sink = Callable[[bytes], Awaitable[None] | None]
Source = Callable[[], Awaitable[bytes]]


class StreamEndedError(Exception):
    """The stream stopped on purpose (marker seen, escape typed, time over)."""


async def relay_stream(
    cluster: Cluster,
    name: str,
    kind: str,
    to_user: Sink,
    from_user: Source | None,
    *,
    resource: str = "virtualmachineinstances",
    protocols: tuple[str, ...] = ("binary.kubevirt.io",),
) -> None:
    """Connect and copy bytes until the server closes, `from_user` returns b'', or a sink
    raises StreamEndedError. Raises SubresourceError with the server's reason on failure."""
    path = cluster.path(resource, name, kind)
    ws = await cluster.websocket(path, protocols)
    async with ws:

        async def downstream() -> None:
            while True:
                message = await ws.receive()
                if message.type in (aiohttp.WSMsgType.BINARY, aiohttp.WSMsgType.TEXT):
                    data = (
                        message.data if isinstance(message.data, bytes) else message.data.encode()
                    )
                    result = to_user(data)
                    if result is not None:
                        await result
                elif message.type is aiohttp.WSMsgType.CLOSE and message.data == 1011:
                    raise SubresourceError(str(message.extra or "the server ended the stream"))
                else:
                    return

        async def upstream() -> None:
            if from_user is None:
                await asyncio.Event().wait()  # nothing to send: read only
                return
            while True:
                data = await from_user()
                if not data:
                    return
                await ws.send_bytes(data)

        tasks = [asyncio.ensure_future(downstream()), asyncio.ensure_future(upstream())]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                with contextlib.suppress(StreamEndedError):
                    task.result()
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
