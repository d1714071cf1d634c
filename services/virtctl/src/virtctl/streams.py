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

__all__ = ["RETRIED_STATUSES", "Progress", "StreamEndedError", "relay_stream"]

#: Refusals that mean "not yet" while waiting for a VMI: not found, not running, no
#: handler ready on its node.
RETRIED_STATUSES = frozenset({404, 409, 502, 503})
# Between connection attempts while waiting (upstream's client polls about as often).
_RETRY_EVERY = 1.0

Sink = Callable[[bytes], Awaitable[None] | None]
Source = Callable[[], Awaitable[bytes]]
#: Told what is waited for while a stream waits for its VMI (a line for the user).
Progress = Callable[[str], None]


class StreamEndedError(Exception):
    """The stream stopped on purpose (marker seen, escape typed, time over)."""


async def _connect(
    cluster: Cluster,
    path: str,
    protocols: tuple[str, ...],
    within: float,
    progress: Progress | None = None,
) -> aiohttp.ClientWebSocketResponse:
    loop = asyncio.get_running_loop()
    started = loop.time()
    deadline = started + within
    last = ""
    while True:
        try:
            return await cluster.websocket(path, protocols)
        except SubresourceError as error:
            if error.status not in RETRIED_STATUSES or loop.time() + _RETRY_EVERY > deadline:
                raise
            # Each new reason once, with how long it has been: a wait the user can follow.
            if progress is not None and str(error) != last:
                last = str(error)
                progress(f"waiting ({loop.time() - started:.0f}s of {within:g}s): {last}")
        await asyncio.sleep(_RETRY_EVERY)


async def relay_stream(
    cluster: Cluster,
    name: str,
    kind: str,
    to_user: Sink,
    from_user: Source | None,
    *,
    resource: str = "virtualmachineinstances",
    protocols: tuple[str, ...] = ("binary.kubevirt.io",),
    connect_within: float = 0,
    progress: Progress | None = None,
) -> None:
    """Connect and copy bytes until the server closes, `from_user` returns b'', or a sink
    raises StreamEndedError. Raises SubresourceError with the server's reason on failure.

    With `connect_within` > 0, a refusal in `RETRIED_STATUSES` (the VMI not there or not
    running yet) is retried for that many seconds before it is raised; `progress` hears
    each new reason for the wait.
    """
    path = cluster.path(resource, name, kind)
    ws = await _connect(cluster, path, protocols, connect_within, progress)
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
