"""VirtualMachineInstancePresets through kubectl: a matching preset's values land on a new
VMI with upstream's annotation and deprecation warning; excluded VMIs and conflicts as upstream."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from typing import Any

import pytest

ANNOTATION = "virtualmachinepreset.kubevirt.io/big"
WARNING = (
    "kubevirt.io/v1 VirtualMachineInstancePresets is now deprecated and will be removed in v2."
)

Apply = Callable[..., subprocess.CompletedProcess[str]]


def preset(name: str, **domain: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstancePreset",
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {"flavor": "big"}},
            "domain": {"devices": {}, **domain},
        },
    }


def vmi(name: str, annotations: dict[str, str] | None = None, **domain: Any) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "labels": {"flavor": "big"}}
    if annotations:
        metadata["annotations"] = annotations
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstance",
        "metadata": metadata,
        "spec": {
            "domain": {"devices": {}, "resources": {"requests": {"memory": "64Mi"}}, **domain},
            "terminationGracePeriodSeconds": 0,
        },
    }


@pytest.fixture
def with_preset(virt_api: Any, apply: Apply) -> Apply:
    """virt-api's webhooks registered, and the `big` preset in the test namespace."""
    created = apply(preset("big", cpu={"cores": 3}, firmware={"serial": "preset-serial"}))
    assert created.returncode == 0, created.stderr
    return apply


def test_a_created_vmi_gets_the_presets_values_and_annotation(
    with_preset: Apply, get_json: Callable[..., Any], namespace: str
) -> None:
    result = with_preset(vmi("plain"))
    assert result.returncode == 0, result.stderr
    assert WARNING in result.stderr
    created = get_json("vmi", "plain", "-n", namespace)
    assert created["metadata"]["annotations"][ANNOTATION] == "kubevirt.io/v1"
    domain = created["spec"]["domain"]
    assert domain["cpu"]["cores"] == 3
    assert domain["firmware"]["serial"] == "preset-serial"


def test_the_vmis_own_values_win_and_the_exclusion_is_honoured(
    with_preset: Apply, get_json: Callable[..., Any], namespace: str
) -> None:
    own = with_preset(vmi("own", cpu={"cores": 1}, firmware={"serial": "mine"}))
    assert own.returncode == 0, own.stderr
    created = get_json("vmi", "own", "-n", namespace)
    assert created["spec"]["domain"]["cpu"]["cores"] == 1
    assert ANNOTATION not in created["metadata"].get("annotations", {})
    excluded = vmi(
        "excluded", {"virtualmachineinstancepresets.admission.kubevirt.io/exclude": "true"}
    )
    result = with_preset(excluded)
    assert result.returncode == 0, result.stderr
    created = get_json("vmi", "excluded", "-n", namespace)
    assert created["spec"]["domain"]["cpu"]["cores"] != 3
    assert ANNOTATION not in created["metadata"]["annotations"]


def test_conflicting_presets_refuse_the_vmi(with_preset: Apply) -> None:
    other = with_preset(preset("other", cpu={"cores": 5}))
    assert other.returncode == 0, other.stderr
    result = with_preset(vmi("refused"))
    assert result.returncode != 0
    assert "VirtualMachinePresets cannot be applied due to conflicts" in result.stderr
    assert "presets 'other' and 'big' conflict" in result.stderr
