"""The command line is validated up front; each mistake names its flag."""

from __future__ import annotations

from pathlib import Path

import pytest
from virt_launcher.args import UsageError, parse_args
from virt_launcher.main import main


def argv(tmp_path: Path, *extra: str) -> list[str]:
    (tmp_path / "sockets").mkdir(exist_ok=True)
    (tmp_path / "private").mkdir(exist_ok=True)
    return [
        "--name", "vm", "--namespace", "ns", "--uid", "1234",
        "--sockets-dir", str(tmp_path / "sockets"),
        "--private-dir", str(tmp_path / "private"),
        *extra,
    ]  # fmt: skip


def test_a_valid_command_line_names_the_domain(tmp_path: Path) -> None:
    args = parse_args(argv(tmp_path, "--grace-period-seconds", "45"))

    assert args.identity.domain_name == "ns_vm"
    assert args.grace_period_seconds == 45
    assert args.libvirt_dir == Path("/var/run/libvirt")


@pytest.mark.parametrize(
    ("extra", "flag"),
    [
        (("--sockets-dir", "relative/dir"), "--sockets-dir"),
        (("--private-dir", "/tmp/../etc"), "--private-dir"),
        (("--grace-period-seconds", "-1"), "--grace-period-seconds"),
        (("--notify-socket", "notify.sock"), "--notify-socket"),
    ],
)
def test_bad_values_name_their_flag(tmp_path: Path, extra: tuple[str, str], flag: str) -> None:
    with pytest.raises(UsageError, match=flag):
        parse_args(argv(tmp_path, *extra))


def test_a_missing_sockets_dir_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"--sockets-dir: .* does not exist"):
        parse_args(argv(tmp_path, "--sockets-dir", str(tmp_path / "absent")))


def test_a_symlinked_dir_is_not_followed(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")

    with pytest.raises(UsageError, match="symlinks are not followed"):
        parse_args(argv(tmp_path, "--sockets-dir", str(tmp_path / "link")))


def test_a_name_with_a_slash_is_refused(tmp_path: Path) -> None:
    args = argv(tmp_path)
    args[1] = "../vm"

    with pytest.raises(UsageError, match="--name"):
        parse_args(args)


def test_main_reports_usage_errors_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(argv(tmp_path, "--sockets-dir", "relative"))

    assert code == 2
    err = capsys.readouterr().err
    assert "virt-launcher: --sockets-dir" in err
    assert "Traceback" not in err
