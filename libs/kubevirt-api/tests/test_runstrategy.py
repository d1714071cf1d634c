"""A VM's effective run strategy: spec.runStrategy, else the deprecated spec.running."""

from __future__ import annotations

from typing import Any

import pytest
from kubevirt_api import load, resolve_run_strategy, run_strategy
from kubevirt_api.enums import RunStrategy
from kubevirt_api.models import VirtualMachine


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"running": True}, "Always"),
        ({"running": False}, "Halted"),
        ({}, "Halted"),
        ({"runStrategy": "Manual", "running": True}, "Manual"),
        ({"runStrategy": "RerunOnFailure"}, "RerunOnFailure"),
        ({"runStrategy": "", "running": True}, "Always"),
        ({"running": "true"}, "Halted"),  # only a JSON true means running
    ],
)
def test_raw_vm(spec: dict[str, Any], expected: str) -> None:
    assert run_strategy({"spec": spec}) == expected


def test_known_strategies_come_back_as_enum_members() -> None:
    assert run_strategy({"spec": {"runStrategy": "Once"}}) is RunStrategy.ONCE
    assert run_strategy({"spec": {"running": True}}) is RunStrategy.ALWAYS


def test_an_unknown_strategy_is_kept_as_written() -> None:
    assert run_strategy({"spec": {"runStrategy": "Sometimes"}}) == "Sometimes"


def test_a_vm_without_spec_is_halted() -> None:
    assert run_strategy({}) == "Halted"
    assert run_strategy({"spec": "garbage"}) == "Halted"


def test_typed_model_resolves_the_same_way() -> None:
    vm = load(
        VirtualMachine,
        {
            "apiVersion": "kubevirt.io/v1",
            "kind": "VirtualMachine",
            "metadata": {"name": "vm"},
            "spec": {"running": True, "template": {"spec": {"domain": {"devices": {}}}}},
        },
    )
    assert resolve_run_strategy(vm.spec.run_strategy, vm.spec.running) == "Always"
