"""`virtctl adm log-verbosity`: upstream's show/set/reset rules and the patch they make."""

from __future__ import annotations

import pytest
from virtctl.cli import main
from virtctl.commands.adm import plan_patch, shown

DEV = "/spec/configuration/developerConfiguration"


def test_show_lists_the_asked_components_with_the_default_for_unset() -> None:
    assert shown({"virt-handler": -1, "virt-api": -1}, {"virtHandler": 6}) == [
        "virt-api=2",
        "virt-handler=6",
    ]
    assert len(shown({"all": -1}, {})) == 5


def test_set_keeps_the_others_and_adds_developer_configuration_when_absent() -> None:
    assert plan_patch({"virt-handler": 6}, False, {}, has_developer=False) == [
        {"op": "add", "path": DEV, "value": {}},
        {"op": "add", "path": f"{DEV}/logVerbosity", "value": {"virtHandler": 6}},
    ]
    assert plan_patch({"virt-api": 3}, False, {"virtHandler": 6}, has_developer=True) == [
        {"op": "add", "path": f"{DEV}/logVerbosity", "value": {"virtHandler": 6, "virtAPI": 3}},
    ]


def test_all_then_one_component_overrides_it() -> None:
    ops = plan_patch({"all": 3, "virt-handler": 7}, False, {}, has_developer=True)
    levels = ops[-1]["value"]
    assert levels["virtHandler"] == 7
    assert {v for k, v in levels.items() if k != "virtHandler"} == {3}
    assert len(levels) == 5


def test_reset_empties_and_a_change_that_changes_nothing_is_no_write() -> None:
    assert plan_patch({}, True, {"virtHandler": 6}, has_developer=True) == [
        {"op": "add", "path": f"{DEV}/logVerbosity", "value": {}}
    ]
    assert plan_patch({}, True, {}, has_developer=True) == []
    assert plan_patch({"virt-handler": 6}, False, {"virtHandler": 6}, has_developer=True) == []
    # Reset, then one set: only that one remains.
    assert plan_patch({"virt-handler": 7}, True, {"virtAPI": 5}, has_developer=True)[-1] == {
        "op": "add",
        "path": f"{DEV}/logVerbosity",
        "value": {"virtHandler": 7},
    }


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--virt-handler=6", "--virt-api"], "only show or set is allowed"),
        (["--virt-handler=10"], "--virt-handler: log verbosity must be 0-9"),
        (["--reset", "--all=3"], "--reset and --all cannot be used together"),
        ([], "no flag specified - expecting at least one flag"),
    ],
)
def test_bad_flags_are_refused_before_any_call(
    flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["adm", "log-verbosity", *flags, "--server", "https://127.0.0.1:1"]) == 2
    assert capsys.readouterr().err.strip() == f"virtctl adm log-verbosity: {message}"
