"""The handler's port-forward reaches 127.0.0.1:<port> inside a pod's netns, not the node's.

A netns of our own (conftest's `make_netns`: an `unshare --net sleep` holder, addressed as
/proc/<pid>/ns/net, never `ip netns add`) plays the launcher pod; a listener made inside it on 127.0.0.1 plays what
the nat `output` chain would DNAT to the guest. Needs root, unshare and ip.
This module's own fixtures are prefixed `pf_`, apart from the tier's conftest.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING

import pytest
from virt_handler.portforward import (
    ForwardTarget,
    PortForwardError,
    open_guest_port,
    socket_in_netns,
)

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not all(shutil.which(t) for t in ("unshare", "nsenter", "ip")),
    reason="needs root, unshare, nsenter and ip (own network namespaces)",
)

if TYPE_CHECKING:
    from conftest import Netns

PORT = 2222


@pytest.fixture
def pf_netns(make_netns: Callable[[], Netns]) -> str:
    """The "pod": a netns from the tier's holder (lo up), as /proc/<pid>/ns/net."""
    return make_netns().path


@pytest.fixture
async def pf_guest(pf_netns: str) -> AsyncIterator[list[bytes]]:
    """An upper-casing server on 127.0.0.1:PORT inside the netns; what it received."""
    received: list[bytes] = []
    listener = socket_in_netns(pf_netns, socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", PORT))
    listener.listen()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(1024):
            received.append(data)
            writer.write(data.upper())
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, sock=listener)
    async with server:
        yield received


async def test_bytes_flow_both_ways_through_a_socket_made_in_the_pod(
    pf_netns: str, pf_guest: list[bytes]
) -> None:
    sock = await open_guest_port(ForwardTarget("127.0.0.1", in_pod=True), PORT, "tcp", pf_netns)
    reader, writer = await asyncio.open_connection(sock=sock)
    writer.write(b"ssh-hello")
    await writer.drain()
    assert await asyncio.wait_for(reader.readexactly(9), 5) == b"SSH-HELLO"
    writer.close()
    assert pf_guest == [b"ssh-hello"]


async def test_the_nodes_own_loopback_is_not_dialed(pf_netns: str, pf_guest: list[bytes]) -> None:
    # Nothing listens on the node's 127.0.0.1:PORT: the same target from here is refused,
    # so the first test's answer can only have come from inside the pod's netns.
    with socket.socket() as probe:
        if probe.connect_ex(("127.0.0.1", PORT)) == 0:
            pytest.skip(f"something on this host listens on 127.0.0.1:{PORT}")
    with pytest.raises(PortForwardError, match="Connection refused"):
        await open_guest_port(ForwardTarget("127.0.0.1", in_pod=False), PORT, "tcp", None)


async def test_a_closed_port_in_the_pod_is_refused_with_a_clear_reason(pf_netns: str) -> None:
    with pytest.raises(PortForwardError) as caught:
        await open_guest_port(ForwardTarget("127.0.0.1", in_pod=True), 2223, "tcp", pf_netns)
    assert str(caught.value) == "dialing tcp 127.0.0.1:2223 in the pod: Connection refused"
