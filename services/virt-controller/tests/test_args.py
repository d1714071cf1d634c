"""Bad flags are refused with the flag's name and exit code 2, without a traceback."""

from __future__ import annotations

import pytest
from virt_controller.app import UsageError, main, parse_args


def test_defaults() -> None:
    s = parse_args([])
    assert s.leader_elect is True
    assert s.lease_namespace == "kubevirt"
    assert s.emulation_override is None


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["--port", "70000"], "--port"),
        (["--workers", "0"], "--workers"),
        (["--lease-duration", "2", "--renew-deadline", "3"], "--lease-duration"),
        (["--node-heartbeat-timeout", "0"], "--node-heartbeat-timeout"),
    ],
)
def test_bad_values_name_the_flag(argv: list[str], flag: str) -> None:
    with pytest.raises(UsageError, match=flag):
        parse_args(argv)


def test_main_exits_2_on_bad_flags(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--workers", "0"]) == 2
    err = capsys.readouterr().err
    assert "--workers" in err
    assert "Traceback" not in err
