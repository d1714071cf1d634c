"""The committed generated models and CRDs are what generation produces now."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from kubevirt_api import codegen, crds
from kubevirt_api.model import FieldInfo
from kubevirt_api.models import CPU

ROOT = Path(__file__).resolve().parents[3]
CRD_DIR = ROOT / "manifests" / "crds"


def test_generated_models_and_descriptions_are_fresh() -> None:
    files = codegen.render_all(json.loads(codegen.find_swagger().read_text()))
    assert set(files) == {codegen.generated_path(), codegen.descriptions_path()}
    for path, text in files.items():
        assert path.read_text() == text, (
            f"{path.name} is stale: run `uv run python -m kubevirt_api.codegen` and commit"
        )
    assert codegen.main(["--check"]) == 0


def test_committed_crds_are_fresh() -> None:
    assert crds.stale_files(CRD_DIR) == [], (
        "manifests/crds is stale: run `uv run python -m kubevirt_api.crds` and commit"
    )
    assert crds.main(["--check", "--output", str(CRD_DIR)]) == 0


def test_a_schema_change_without_regeneration_is_caught(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Give CPU.cores a different JSON key, as an edited model would.
    (cores,) = [f for f in dataclasses.fields(CPU) if f.name == "cores"]
    changed = dict(cores.metadata)
    changed["kubevirt_api"] = FieldInfo(json="coreCount")
    monkeypatch.setattr(cores, "metadata", changed)
    stale = crds.stale_files(CRD_DIR)
    assert "virtualmachineinstances.kubevirt.io.yaml" in stale
    assert crds.main(["--check", "--output", str(CRD_DIR)]) == 1
    assert "uv run python -m kubevirt_api.crds" in capsys.readouterr().err


def test_a_swagger_change_without_regeneration_is_caught() -> None:
    swagger = json.loads(codegen.find_swagger().read_text())
    swagger["definitions"]["v1.CPU"]["properties"]["newKnob"] = {
        "type": "string",
        "description": "A knob.",
    }
    files = codegen.render_all(swagger)
    assert all(path.read_text() != text for path, text in files.items())
