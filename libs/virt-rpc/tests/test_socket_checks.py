"""The socket checks every service uses: stale sockets go, everything else is refused."""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from virt_rpc import (
    SocketPathError,
    check_length,
    open_unix_connection,
    pin_socket,
    remove_stale_socket,
    socket_stat,
)


@pytest.fixture
def listening(sock_dir: Path) -> Iterator[socket.socket]:
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(sock_dir / "real-sock"))
    server.listen(4)
    try:
        yield server
    finally:
        server.close()


def test_a_stale_socket_is_removed(sock_dir: Path) -> None:
    path = sock_dir / "launcher-sock"
    socket.socket(socket.AF_UNIX).bind(str(path))  # closed at once: stale

    assert remove_stale_socket(path) is True
    assert not path.exists()
    assert remove_stale_socket(path) is False  # nothing there is fine


def test_a_stale_socket_is_removed_relative_to_an_open_directory(sock_dir: Path) -> None:
    socket.socket(socket.AF_UNIX).bind(str(sock_dir / "kubevirt-kvm.sock"))
    fd = os.open(sock_dir, os.O_PATH | os.O_DIRECTORY)
    try:
        assert socket_stat("kubevirt-kvm.sock", dir_fd=fd) is not None
        assert remove_stale_socket("kubevirt-kvm.sock", dir_fd=fd) is True
    finally:
        os.close(fd)
    assert not (sock_dir / "kubevirt-kvm.sock").exists()


def test_a_symlink_is_refused_and_kept(sock_dir: Path, listening: socket.socket) -> None:
    link = sock_dir / "launcher-sock"
    link.symlink_to(sock_dir / "real-sock")

    assert socket_stat(link) is None
    with pytest.raises(SocketPathError, match="not a socket; refusing to replace it"):
        remove_stale_socket(link)
    with pytest.raises(SocketPathError, match="is a symlink"):
        pin_socket(link)
    assert link.is_symlink()
    assert socket_stat(sock_dir / "real-sock") is not None


def test_a_regular_file_is_refused_and_kept(sock_dir: Path) -> None:
    path = sock_dir / "launcher-sock"
    path.write_text("precious")

    assert socket_stat(path) is None
    with pytest.raises(SocketPathError, match="refusing to replace it"):
        remove_stale_socket(path)
    with pytest.raises(SocketPathError, match="is not a unix socket"):
        pin_socket(path)
    assert path.read_text() == "precious"


def test_a_too_long_path_is_refused(sock_dir: Path) -> None:
    path = sock_dir / ("x" * 120)
    with pytest.raises(SocketPathError, match="at most 107 fit"):
        check_length(path)
    with pytest.raises(SocketPathError, match="at most 107 fit"):
        remove_stale_socket(path)


def test_a_missing_socket_is_not_found(sock_dir: Path) -> None:
    with pytest.raises(FileNotFoundError, match="launcher-sock: no such socket"):
        pin_socket(sock_dir / "launcher-sock")


def test_a_pinned_socket_is_reached_after_its_name_is_swapped_for_a_symlink(
    sock_dir: Path, listening: socket.socket
) -> None:
    decoy = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    decoy.bind(str(sock_dir / "decoy-sock"))
    decoy.listen(4)
    try:
        with pin_socket(sock_dir / "real-sock") as pinned:
            # What a hostile pod could do between the check and the connect.
            (sock_dir / "real-sock").rename(sock_dir / "moved-sock")
            (sock_dir / "real-sock").symlink_to(sock_dir / "decoy-sock")
            client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            client.connect(pinned.path)
            client.close()
        accepted, _ = listening.accept()
        accepted.close()
        decoy.setblocking(False)
        with pytest.raises(BlockingIOError):
            decoy.accept()
    finally:
        decoy.close()


async def test_open_unix_connection_refuses_a_symlink(
    sock_dir: Path, listening: socket.socket, no_blocking: None
) -> None:
    link = sock_dir / "launcher-sock"
    await asyncio.to_thread(link.symlink_to, sock_dir / "real-sock")
    with pytest.raises(SocketPathError, match="is a symlink"):
        await open_unix_connection(link)


async def test_open_unix_connection_reaches_a_socket(
    sock_dir: Path, listening: socket.socket, no_blocking: None
) -> None:
    _reader, writer = await open_unix_connection(sock_dir / "real-sock")
    writer.close()
    await writer.wait_closed()
    accepted, _ = await asyncio.to_thread(listening.accept)
    accepted.close()
