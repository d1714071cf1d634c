"""`virtctl completion`: scripts that offer this virtctl's own commands, values and flags."""

from __future__ import annotations

import subprocess

import pytest
from virtctl.cli import main


def _script(shell: str, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["completion", shell]) == 0
    return capsys.readouterr().out


def _bash_offers(script: str, *words: str) -> list[str]:
    """What bash completes for the last of `words` after `virtctl`."""
    line = " ".join(f"'{w}'" for w in ("virtctl", *words))
    probe = (
        f"{script}\nCOMP_WORDS=({line}); COMP_CWORD={len(words)}; _virtctl_complete; "
        'printf "%s\\n" "${COMPREPLY[@]}"'
    )
    proc = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, check=True)
    return proc.stdout.split()


def test_bash_completes_commands_values_and_flags(capsys: pytest.CaptureFixture[str]) -> None:
    script = _script("bash", capsys)
    assert _bash_offers(script, "res") == ["restart", "reset"]
    assert _bash_offers(script, "stop", "--gr") == ["--grace-period"]
    # Flags and their values before the command do not hide it.
    assert _bash_offers(script, "-n", "ns1", "pause", "")[:2] == ["vm", "vmi"]
    assert _bash_offers(script, "completion", "") == ["bash", "zsh", "fish", "--help"]


def test_zsh_script_loads_the_bash_layer(capsys: pytest.CaptureFixture[str]) -> None:
    script = _script("zsh", capsys)
    assert script.startswith("#compdef virtctl\n")
    assert "bashcompinit" in script
    assert "complete -o default -F _virtctl_complete virtctl" in script


def test_fish_script_names_each_command_with_its_help(capsys: pytest.CaptureFixture[str]) -> None:
    script = _script("fish", capsys)
    assert (
        "complete -c virtctl -f -n '__fish_use_subcommand' -a reset "
        "-d 'reset a virtual machine instance, like pressing its reset button'"
    ) in script
    assert "complete -c virtctl -n '__fish_seen_subcommand_from stop' -l grace-period" in script


def test_an_unknown_shell_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["completion", "tcsh"]) == 2
    assert "invalid choice: 'tcsh'" in capsys.readouterr().err
