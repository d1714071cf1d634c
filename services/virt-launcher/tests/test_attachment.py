"""The hotplug attachment pod's program: a blank filesystem claim gets its disk.img at the
launcher's size, an existing one is kept, a block claim gets none, a memoryDump claim's
directory is made writable for the running user; then it waits for SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from virt_launcher.attachment import DumpDirectoryError, main, parse_args, prepare
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
        (["--dump-dir", "d=relative"], "--dump-dir d: 'relative' must be absolute"),
        (["--dump-dir", "d=/a/../b"], "absolute, without '..'"),
        (["--dump-dir", "d"], "NAME=VALUE"),
        (["--dump-dir", "d=/x", "--dump-dir", "d=/y"], "--dump-dir d: given twice"),
        (["--volume", "d=/x", "--dump-dir", "d=/y"], "--dump-dir d: already given as --volume"),
        (["--dump-dir", "d=/x", "--volume", "d=/y"], "--volume d: already given as --dump-dir"),
        (["--dump-dir", "d=/x", "--claim-info", "d={}"], "a --dump-dir gets no image"),
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


# -- memoryDump volumes ------------------------------------------------------------------

NOBODY = 65534


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory another user may enter (pytest's tmp_path is the runner's alone)."""
    path = Path(tempfile.mkdtemp(prefix="kv-attach-"))
    path.chmod(0o755)
    yield path
    subprocess.run(["rm", "-rf", str(path)], check=False)


def as_user(uid: int, work: Callable[[], object]) -> tuple[int, str]:
    """Run ``work`` in a child process as ``uid`` (the runner's own uid: as is); its exit
    status (0, or 1 with DumpDirectoryError's message)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 2
        try:
            os.close(read)
            if uid != os.geteuid():
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)
            work()
            code = 0
        except DumpDirectoryError as exc:
            os.write(write, str(exc).encode())
            code = 1
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read) as pipe:
        message = pipe.read()
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), message


def unprivileged() -> int:
    """A uid without CAP_DAC_OVERRIDE: the runner's, or nobody's when it is root."""
    return NOBODY if os.geteuid() == 0 else os.geteuid()


def test_a_dump_directory_is_reported_and_gets_no_image(tmp_path: Path) -> None:
    [volume] = parse_args(["--dump-dir", f"dump={tmp_path}/"])
    assert prepare([volume]) == [{"volume": "dump", "directory": str(tmp_path)}]
    assert os.listdir(tmp_path) == []


def test_an_own_dump_directory_the_user_cannot_write_gets_u_rwx(shared_dir: Path) -> None:
    directory = shared_dir / "claim"
    directory.mkdir(mode=0o755)
    user = unprivileged()
    os.chown(directory, user, user)
    directory.chmod(0o055)

    code, message = as_user(user, lambda: prepare(parse_args(["--dump-dir", f"d={directory}"])))

    assert (code, message) == (0, "")
    assert stat.S_IMODE(directory.stat().st_mode) == 0o755


def test_a_dump_directory_of_another_user_that_is_not_writable_is_refused(
    shared_dir: Path,
) -> None:
    directory = shared_dir / "claim"
    directory.mkdir(mode=0o755)  # the runner's (root's) or, unprivileged, still not nobody's
    user = unprivileged()
    if user == os.geteuid():
        pytest.skip("needs root to make a directory owned by another user")

    code, message = as_user(user, lambda: prepare(parse_args(["--dump-dir", f"d={directory}"])))

    assert code == 1
    assert message.startswith(f"volume d: {directory} is not writable by uid {user}")
    assert stat.S_IMODE(directory.stat().st_mode) == 0o755


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (lambda p: None, "does not exist"),
        (lambda p: p.symlink_to(p.parent), "not a directory (symlinks are not followed)"),
        (lambda p: p.write_bytes(b""), "not a directory"),
    ],
)
@pytest.mark.usefixtures("keep_signal_mask")
def test_main_exits_at_once_when_a_dump_directory_cannot_be_used(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    make: Callable[[Path], object],
    problem: str,
) -> None:
    def never() -> None:
        raise AssertionError("must not wait")

    target = tmp_path / "claim"
    make(target)
    assert main(["--dump-dir", f"dump={target}"], never) == 1
    err = capsys.readouterr().err
    assert f"volume dump: {target}" in err
    assert problem in err


@pytest.mark.usefixtures("keep_signal_mask")
def test_main_reports_images_and_dump_directories_in_command_line_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    disk, dump = tmp_path / "disk", tmp_path / "dump"
    disk.mkdir()
    dump.mkdir()
    (disk / "disk.img").write_bytes(b"")
    argv = ["--dump-dir", f"memory={dump}", "--volume", f"data={disk}"]
    assert main(argv, wait=lambda: None) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines[0] == {"volume": "memory", "directory": str(dump)}
    assert (lines[1]["volume"], lines[1]["created"]) == ("data", False)
