"""The launcher socket is found through the pods dir; symlinks and escapes are refused."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from virt_handler import LAUNCHER_SOCKET, PathRefusedError, PodFiles, pod_uid

POD = "0b7c2b4e-6d0e-4f5e-9a53-1d5a0b7c2b4e"


@pytest.fixture
def pods(tmp_path: Path) -> Path:
    return tmp_path / "pods"


def _sockets_dir(pods: Path, pod: str = POD) -> Path:
    d = pods / pod / "volumes" / "kubernetes.io~empty-dir" / "sockets"
    d.mkdir(parents=True)
    return d


@pytest.fixture
def bound() -> Iterator[list[socket.socket]]:
    made: list[socket.socket] = []
    yield made
    for s in made:
        s.close()


def _bind(path: Path, made: list[socket.socket]) -> None:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    # Bind through a short /proc path: the test's tmp dir can be deep.
    fd = os.open(path.parent, os.O_PATH | os.O_DIRECTORY)
    try:
        s.bind(f"/proc/self/fd/{fd}/{path.name}")
    finally:
        os.close(fd)
    made.append(s)


def test_a_real_socket_is_found_through_a_short_path(
    pods: Path, bound: list[socket.socket]
) -> None:
    sockets = _sockets_dir(pods)
    _bind(sockets / LAUNCHER_SOCKET, bound)
    with PodFiles(pods).sockets_dir(pod_uid(POD)) as pinned, pinned.socket(LAUNCHER_SOCKET) as sock:
        assert len(sock.path) < 107
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        bound[0].listen(1)
        client.connect(sock.path)  # the short path reaches the very socket
        client.close()


def test_a_symlink_planted_at_the_socket_path_is_refused(
    pods: Path, tmp_path: Path, bound: list[socket.socket]
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    _bind(elsewhere / "real", bound)
    sockets = _sockets_dir(pods)
    (sockets / LAUNCHER_SOCKET).symlink_to(elsewhere / "real")
    with (
        PodFiles(pods).sockets_dir(pod_uid(POD)) as pinned,
        pytest.raises(PathRefusedError, match="symlink"),
    ):
        pinned.socket(LAUNCHER_SOCKET)


def test_a_symlinked_directory_on_the_way_is_refused(pods: Path, tmp_path: Path) -> None:
    real = tmp_path / "real-sockets"
    real.mkdir()
    parent = pods / POD / "volumes" / "kubernetes.io~empty-dir"
    parent.mkdir(parents=True)
    (parent / "sockets").symlink_to(real)
    with pytest.raises(PathRefusedError, match="symlink"):
        PodFiles(pods).sockets_dir(pod_uid(POD))


def test_a_regular_file_is_not_a_socket(pods: Path) -> None:
    sockets = _sockets_dir(pods)
    (sockets / LAUNCHER_SOCKET).write_text("")
    with (
        PodFiles(pods).sockets_dir(pod_uid(POD)) as pinned,
        pytest.raises(PathRefusedError, match="not a unix socket"),
    ):
        pinned.socket(LAUNCHER_SOCKET)


def test_a_missing_socket_means_not_ready(pods: Path) -> None:
    _sockets_dir(pods)
    with PodFiles(pods).sockets_dir(pod_uid(POD)) as pinned, pytest.raises(FileNotFoundError):
        pinned.socket(LAUNCHER_SOCKET)


@pytest.mark.parametrize("bad", ["..", "../etc", "a/b", "", "not-a-uid", POD + "/.."])
def test_a_pod_uid_that_could_escape_the_pods_dir_is_refused(bad: str) -> None:
    with pytest.raises(PathRefusedError, match="Kubernetes UID"):
        pod_uid(bad)
