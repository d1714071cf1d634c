"""The hotplug attachment pod's program: a blank filesystem claim gets its disk.img at the
launcher's size, an existing one is kept, a block claim gets none; then it waits for SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from virt_launcher.attachment import main, parse_args, prepare
from virt_launcher.disks import ClaimImageError

MIB = 1 << 20
INFO = json.dumps({"capacity": {"storage": "64Mi"}, "requests": {"storage": "64Mi"}})


@pytest.fixture
def keep_signal_mask() -> Iterator[None]:
    """`main` blocks SIGTERM/SIGINT for its wait; give pytest its mask back."""
    before = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    yield
    signal.pthread_sigmask(signal.SIG_SETMASK, before)


def test_a_blank_claim_gets_a_sparse_image_of_its_size(tmp_path: Path) -> None:
    [volume] = parse_args(["--volume", f"data={tmp_path}", "--claim-info", f"data={INFO}"])
    [line] = prepare([volume])
    image = tmp_path / "disk.img"
    assert line == {"volume": "data", "image": str(image), "created": True, "size": 64 * MIB}
    found = image.lstat()
    assert stat.S_ISREG(found.st_mode)
    assert stat.S_IMODE(found.st_mode) == 0o660
    assert found.st_uid == os.getuid()
    assert found.st_blocks * 512 < MIB  # sparse


def test_an_existing_image_is_the_guests_data_and_stays(tmp_path: Path) -> None:
    (tmp_path / "disk.img").write_bytes(b"data")
    [line] = prepare(parse_args(["--volume", f"data={tmp_path}"]))
    assert (line["created"], line["size"]) == (False, 4)
    assert (tmp_path / "disk.img").read_bytes() == b"data"


def test_a_block_claim_gets_no_image(tmp_path: Path) -> None:
    info = json.dumps({"volumeMode": "Block", "capacity": {"storage": "1Gi"}})
    [line] = prepare(parse_args(["--volume", f"raw={tmp_path}", "--claim-info", f"raw={info}"]))
    assert line == {"volume": "raw", "block": True}
    assert not (tmp_path / "disk.img").exists()


def test_a_link_in_place_of_the_image_is_refused(tmp_path: Path) -> None:
    (tmp_path / "disk.img").symlink_to("/etc/passwd")
    with pytest.raises(ClaimImageError, match=r"volume data: .* not a regular file"):
        prepare(parse_args(["--volume", f"data={tmp_path}", "--claim-info", f"data={INFO}"]))


def test_without_a_size_no_image_is_made(tmp_path: Path) -> None:
    with pytest.raises(ClaimImageError, match="size is not known"):
        prepare(parse_args(["--volume", f"data={tmp_path}"]))


@pytest.mark.parametrize(
    ("argv", "problem"),
    [
        ([], "at least one --volume"),
        (["--volume", "data"], "NAME=VALUE"),
        (["--volume", "data=relative"], "absolute"),
        (["--volume", "data=/a/../b"], "absolute"),
        (["--volume", "a=/x", "--volume", "a=/y"], "twice"),
        (["--volume", "a=/x", "--claim-info", "b={}"], "no --volume b"),
        (["--volume", "a=/x", "--claim-info", "a=not json"], "persistentVolumeClaimInfo"),
        (["--bogus"], "unrecognized"),
        (["--volume"], "expected one argument"),
    ],
)
def test_a_bad_command_line_says_what_is_wrong(argv: list[str], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_args(argv)


@pytest.mark.usefixtures("keep_signal_mask")
def test_main_prints_a_line_per_volume_then_waits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    (second / "disk.img").write_bytes(b"")
    waited: list[bool] = []
    argv = ["--volume", f"a={first}", "--claim-info", f"a={INFO}", "--volume", f"b={second}"]
    assert main(argv, wait=lambda: waited.append(True)) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(line["volume"], line["created"]) for line in lines] == [("a", True), ("b", False)]
    assert waited == [True]


@pytest.mark.usefixtures("keep_signal_mask")
def test_main_exits_at_once_when_an_image_cannot_be_made(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def never() -> None:
        raise AssertionError("must not wait")

    assert main(["--volume", f"a={tmp_path / 'missing'}", "--claim-info", f"a={INFO}"], never) == 1
    assert "not mounted" in capsys.readouterr().err
    assert main(["--volume", "a"], never) == 2


def test_the_program_ends_cleanly_on_sigterm(tmp_path: Path) -> None:
    argv = ["--volume", f"data={tmp_path}", "--claim-info", f"data={INFO}"]
    with subprocess.Popen(
        [sys.executable, "-m", "virt_launcher.attachment", *argv],
        stdout=subprocess.PIPE,
        text=True,
    ) as program:
        assert program.stdout is not None
        line = json.loads(program.stdout.readline())  # printed: the image is there
        assert line["created"] is True
        program.send_signal(signal.SIGTERM)
        assert program.wait(timeout=30) == 0
