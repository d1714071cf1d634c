"""Version handshake: a common version is agreed, an unsupported peer is refused."""

from __future__ import annotations

from pathlib import Path

import grpclib
import pytest
import virt_rpc
from grpclib.const import Status
from virt_rpc import (
    HandshakeService,
    HandshakeStub,
    HelloRequest,
    UnsupportedProtocolVersionError,
    negotiate,
    select_protocol_version,
)


@pytest.mark.parametrize(
    ("ours", "theirs", "expected"),
    [
        ((1,), (1,), 1),
        ((1, 2), (1,), 1),
        ((1, 2, 3), (2, 3, 4), 3),
        ((1,), (2,), 0),
        ((1,), (), 0),
        ((0,), (0,), 0),
    ],
)
def test_select_picks_highest_common_version(
    ours: tuple[int, ...], theirs: tuple[int, ...], expected: int
) -> None:
    assert select_protocol_version(ours, theirs) == expected


async def test_same_build_agrees_on_current_version(sock_dir: Path, no_blocking: None) -> None:
    path = sock_dir / "launcher-sock"
    server = await virt_rpc.serve_unix([HandshakeService("virt-launcher", "0.1.0")], path)
    try:
        async with await virt_rpc.open_channel(path) as channel:
            peer = await negotiate(channel, "virt-handler", "0.1.0")
    finally:
        server.close()
        await server.wait_closed()
    assert peer.component == "virt-launcher"
    assert peer.build_version == "0.1.0"
    assert peer.protocol_version == virt_rpc.PROTOCOL_VERSION


async def test_the_server_hears_of_each_agreed_handshake_only(
    sock_dir: Path, no_blocking: None
) -> None:
    path = sock_dir / "notify-sock"
    heard: list[str] = []
    service = HandshakeService("virt-handler", "0.1.0", on_hello=lambda: heard.append("hello"))
    server = await virt_rpc.serve_unix([service], path)
    try:
        async with await virt_rpc.open_channel(path) as channel:
            await negotiate(channel, "virt-launcher", "0.1.0")
            assert heard == ["hello"]
            # A peer with nothing in common is not a peer to look at.
            await HandshakeStub(channel).hello(HelloRequest(protocol_versions=[7]))
    finally:
        server.close()
        await server.wait_closed()
    assert heard == ["hello"]


async def test_launcher_without_common_version_is_refused(
    sock_dir: Path, no_blocking: None
) -> None:
    path = sock_dir / "launcher-sock"
    future = HandshakeService("virt-launcher", "9.0.0", protocol_versions=(7, 8))
    server = await virt_rpc.serve_unix([future], path)
    try:
        async with await virt_rpc.open_channel(path) as channel:
            with pytest.raises(UnsupportedProtocolVersionError) as err:
                await negotiate(channel, "virt-handler", "0.1.0")
            # The server also reports that nothing is in common.
            reply = await HandshakeStub(channel).hello(HelloRequest(protocol_versions=[1]))
    finally:
        server.close()
        await server.wait_closed()
    assert err.value.theirs == (7, 8)
    assert err.value.ours == virt_rpc.SUPPORTED_PROTOCOL_VERSIONS
    assert "virt-launcher speaks protocol versions [7, 8]" in str(err.value)
    assert reply.selected_protocol_version == 0


async def test_peer_without_handshake_is_refused(sock_dir: Path, no_blocking: None) -> None:
    path = sock_dir / "launcher-sock"
    server = await virt_rpc.serve_unix([virt_rpc.CmdBase()], path)
    try:
        async with await virt_rpc.open_channel(path) as channel:
            with pytest.raises(UnsupportedProtocolVersionError):
                await negotiate(channel, "virt-handler", "0.1.0")
    finally:
        server.close()
        await server.wait_closed()


async def test_oversized_hello_is_rejected_with_field_name() -> None:
    service = HandshakeService("virt-launcher", "0.1.0")
    with pytest.raises(grpclib.GRPCError) as err:
        await service.hello(HelloRequest(protocol_versions=list(range(1, 100))))
    assert err.value.status is Status.INVALID_ARGUMENT
    assert err.value.message is not None
    assert err.value.message.startswith("protocol_versions:")
