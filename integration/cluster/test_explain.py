"""`kubectl explain` reads field documentation from the published CRD schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kv_cluster import Kubectl

SWAGGER = (
    Path(__file__).resolve().parents[2]
    / "compat"
    / "upstream-kubevirt"
    / "openapi"
    / "swagger.json"
)


def _words(text: str) -> str:
    return " ".join(text.split())


def test_explain_describes_run_strategy(kube: Any, kubectl: Kubectl) -> None:
    kube.require_crds()
    out = kubectl.run("explain", "virtualmachine.spec.runStrategy").stdout
    assert "KIND:       VirtualMachine" in out or _words(out).startswith(
        "GROUP: kubevirt.io KIND: VirtualMachine"
    )
    assert "FIELD: runStrategy <string>" in _words(out)
    upstream = json.loads(SWAGGER.read_text())["definitions"]["v1.VirtualMachineSpec"]
    described = upstream["properties"]["runStrategy"]["description"]
    # The first sentence of upstream's description, as the user reads it.
    assert _words(described)[:60] in _words(out)


def test_explain_refuses_a_field_that_does_not_exist(kube: Any, kubectl: Kubectl) -> None:
    kube.require_crds()
    out = kubectl.run("explain", "virtualmachine.spec.runStrategyy", check=False)
    assert out.returncode != 0
    assert "runStrategyy" in out.stderr
