"""``python -m virt_launcher`` starts libvirtd before its heavy imports, and the
supervisor takes that libvirtd over; whatever goes wrong early is left to main() to
report. A stand-in libvirtd (it serves its socket and hangs up on every client) plays
the daemon: the real one is in integration/launcher."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from virt_launcher.headstart import begin_head_start
from virt_launcher.libvirtd import Libvirtd, LibvirtdPaths

FAKE_LIBVIRTD = """\
import os, socket, sys
config = sys.argv[sys.argv.index("-f") + 1]
server = socket.socket(socket.AF_UNIX)
server.bind(os.path.join(os.path.dirname(config), "libvirt-sock"))
server.listen(8)
while True:
    client, _ = server.accept()
    client.close()
"""


def argv(tmp_path: Path, libvirtd: str) -> list[str]:
    for name in ("sockets", "private"):
        (tmp_path / name).mkdir(exist_ok=True)
    return [
        "--name", "vm", "--namespace", "default", "--uid", "u-1",
        "--sockets-dir", str(tmp_path / "sockets"),
        "--private-dir", str(tmp_path / "private"),
        "--libvirt-dir", str(tmp_path / "lv"),
        "--libvirtd", libvirtd,
    ]  # fmt: skip


@pytest.fixture
def base() -> Iterator[Path]:
    """A directory the unprivileged user libvirtd runs as (when we are root) can reach:
    pytest's tmp_path is root's alone."""
    path = Path(tempfile.mkdtemp(prefix="kv-head-start-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def fake_libvirtd(base: Path) -> str:
    # The system's python3 when there is one: root's interpreter may be out of reach
    # of the unprivileged user.
    python = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
    script = base / "libvirtd"
    script.write_text(f"#!{python}\n{FAKE_LIBVIRTD}")
    script.chmod(0o755)
    return str(script)


async def test_the_supervisor_takes_over_the_libvirtd_started_early(
    base: Path, fake_libvirtd: str
) -> None:
    head_start = begin_head_start(argv(base, fake_libvirtd))
    assert head_start is not None
    libvirtd = Libvirtd(LibvirtdPaths(base / "lv"), started=head_start.libvirtd)
    try:
        await libvirtd.start(ready_within=30)
        assert libvirtd.pid == head_start.libvirtd.pid
        assert (base / "lv" / "libvirtd.conf").is_file()
        # The early probe failed (no libvirt behind the socket); the launcher goes on.
        assert await asyncio.to_thread(head_start.probed.wait, 30)
        assert head_start.outcome.error
        # Its death is seen through the supervisor, as for a libvirtd it started itself.
        os.kill(head_start.libvirtd.pid, signal.SIGKILL)
        assert await asyncio.wait_for(libvirtd.wait(), 10) == -signal.SIGKILL
    finally:
        await libvirtd.stop(term_grace=5)


async def test_stop_ends_a_libvirtd_started_early(base: Path, fake_libvirtd: str) -> None:
    head_start = begin_head_start(argv(base, fake_libvirtd))
    assert head_start is not None
    libvirtd = Libvirtd(LibvirtdPaths(base / "lv"), started=head_start.libvirtd)
    await libvirtd.start(ready_within=30)

    await libvirtd.stop(term_grace=5)

    assert head_start.libvirtd.poll() == -signal.SIGTERM


@pytest.mark.parametrize("argv", [["--name", "vm"], ["--help"]], ids=["bad", "help"])
def test_the_command_line_is_left_to_main(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    # main() parses the same argv and prints its message or help, once.
    assert begin_head_start(argv) is None
    assert capsys.readouterr() == ("", "")


def test_a_libvirtd_that_cannot_start_is_left_to_main(tmp_path: Path) -> None:
    assert begin_head_start(argv(tmp_path, str(tmp_path / "no-such-libvirtd"))) is None
