"""The launcher runs as a service_kit service: JSON logs, exit codes, its sockets cleaned up."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from virt_launcher.main import main


@pytest.fixture
def base() -> Iterator[Path]:
    # Short: the init socket's path must fit in a unix socket address.
    path = Path(tempfile.mkdtemp(prefix="vl-", dir="/tmp"))
    for sub in ("sockets", "private"):
        (path / sub).mkdir()
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def test_a_libvirtd_that_cannot_start_ends_the_launcher_with_code_1(
    base: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "--name", "vm", "--namespace", "ns", "--uid", "1234",
            "--sockets-dir", str(base / "sockets"),
            "--private-dir", str(base / "private"),
            "--libvirt-dir", str(base / "libvirt"),
            "--libvirtd", "/bin/false",
        ]
    )  # fmt: skip

    assert code == 1
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines() if line]
    failure = next(line for line in lines if line["msg"] == "libvirtd failed")
    assert failure["component"] == "virt-launcher"
    assert failure["level"] == "error"
    assert "exited with 1" in failure["error"]
    # Neither the init socket nor a ready one is left for virt-handler to find.
    assert list((base / "sockets").iterdir()) == []
