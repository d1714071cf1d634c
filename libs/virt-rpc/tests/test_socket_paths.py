"""Socket paths are lstat'ed: symlinks and other files are refused, never followed."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest
import virt_rpc
from grpclib.server import Server
from virt_rpc import SocketPathError, check_socket, open_channel, serve_unix


async def test_server_socket_is_private_and_checkable(sock_dir: Path, no_blocking: None) -> None:
    path = sock_dir / "launcher-sock"
    server = await serve_unix([virt_rpc.HandshakeService("virt-launcher", "0.1.0")], path)
    try:
        assert stat.S_IMODE(os.lstat(path).st_mode) == 0o600
        assert check_socket(path) == path
    finally:
        server.close()
        await server.wait_closed()


async def test_stale_socket_is_replaced(sock_dir: Path, no_blocking: None) -> None:
    path = sock_dir / "launcher-sock"
    first = await serve_unix([virt_rpc.HandshakeService("a", "1")], path)
    first.close()
    await first.wait_closed()
    # grpclib leaves the socket file behind, as a crashed launcher would.
    second = await serve_unix([virt_rpc.HandshakeService("b", "1")], path)
    try:
        async with await open_channel(path) as channel:
            peer = await virt_rpc.negotiate(channel, "test", "0")
        assert peer.component == "b"
    finally:
        second.close()
        await second.wait_closed()


async def test_regular_file_is_not_replaced(sock_dir: Path) -> None:
    path = sock_dir / "launcher-sock"
    path.write_text("precious")
    with pytest.raises(SocketPathError, match="not a socket; refusing to replace it"):
        await serve_unix([virt_rpc.HandshakeService("a", "1")], path)
    assert path.read_text() == "precious"


async def test_symlink_to_a_socket_is_refused(sock_dir: Path) -> None:
    real = sock_dir / "real-sock"
    server = await serve_unix([virt_rpc.HandshakeService("a", "1")], real)
    try:
        link = sock_dir / "launcher-sock"
        link.symlink_to(real)
        with pytest.raises(SocketPathError, match="is a symlink"):
            await open_channel(link)
    finally:
        server.close()
        await server.wait_closed()


async def test_a_socket_swapped_for_a_symlink_after_bind_is_not_chmodded_through(
    sock_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    victim = sock_dir / "victim"
    victim.write_text("someone else's file")
    victim.chmod(0o644)
    path = sock_dir / "launcher-sock"
    start = Server.start

    async def start_then_swap(self: Server, *args: Any, **kwargs: Any) -> None:
        await start(self, *args, **kwargs)
        path.unlink()  # what a hostile peer sharing the directory could do
        path.symlink_to(victim)

    monkeypatch.setattr(Server, "start", start_then_swap)
    with pytest.raises(SocketPathError, match="replaced after bind"):
        await serve_unix([virt_rpc.HandshakeService("a", "1")], path)
    assert stat.S_IMODE(victim.stat().st_mode) == 0o644


def test_missing_socket_is_named(sock_dir: Path) -> None:
    with pytest.raises(SocketPathError, match="launcher-sock: no such socket"):
        check_socket(sock_dir / "launcher-sock")


def test_too_long_path_is_refused_before_use(sock_dir: Path) -> None:
    path = sock_dir / ("x" * 120)
    with pytest.raises(SocketPathError, match="at most 107 fit"):
        check_socket(path)
