"""virtctl's administrative commands on the real cluster: log verbosity followed live."""

from __future__ import annotations

from typing import Any


def _handler_logs_after(kubevirt: Any, offset: int, text: str) -> str | None:
    log = kubevirt.handler.log.read_text(errors="replace")[offset:]
    return next((line for line in log.splitlines() if text in line), None)


def test_adm_log_verbosity_raises_the_handlers_level_without_a_restart(kubevirt: Any) -> None:
    pid = kubevirt.handler_pid()
    offset = kubevirt.handler.log.stat().st_size
    proc = kubevirt.virtctl("adm", "log-verbosity", "--virt-handler=6")
    assert proc.returncode == 0, proc.stderr
    try:
        assert proc.stdout.strip() == "successfully set/reset the log verbosity"
        shown = kubevirt.virtctl("adm", "log-verbosity", "--virt-handler")
        assert shown.stdout.strip() == "virt-handler=6"
        line = kubevirt.wait_for(
            "virt-handler to log at debug level",
            lambda: _handler_logs_after(kubevirt, offset, "log level is now debug (verbosity 6)"),
            60,
        )
        assert '"level": "warning"' in line or '"level":"warning"' in line
        assert kubevirt.handler_pid() == pid, "virt-handler was restarted"
    finally:
        reset = kubevirt.virtctl("adm", "log-verbosity", "--reset")
        assert reset.returncode == 0, reset.stderr
    kubevirt.wait_for(
        "virt-handler back at its own level",
        lambda: _handler_logs_after(kubevirt, offset, "log level is now info (verbosity unset)"),
        60,
    )
