"""The CRDs step waits for Established itself: a CRD just created has no conditions yet."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
from kv_cluster.crds import CrdsError, wait_established

NAME = "customresourcedefinition.apiextensions.k8s.io/kubevirts.kubevirt.io"


class FakeKubectl:
    """Answers `get` with the next body of `answers` (the last one repeats)."""

    def __init__(self, *answers: dict[str, Any]) -> None:
        self.answers = list(answers)
        self.calls = 0

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        assert args[0] == "get"
        self.calls += 1
        body = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        return subprocess.CompletedProcess(list(args), 0, json.dumps(body), "")


def _crd(conditions: list[dict[str, str]] | None) -> dict[str, Any]:
    crd: dict[str, Any] = {
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "kubevirts.kubevirt.io"},
    }
    if conditions is not None:
        crd["status"] = {"conditions": conditions}
    return crd


def test_a_crd_without_conditions_yet_is_waited_for() -> None:
    kubectl = FakeKubectl(
        _crd(None),  # what kubectl wait choked on
        _crd([{"type": "NamesAccepted", "status": "True"}]),
        _crd([{"type": "Established", "status": "True"}]),
    )
    wait_established(kubectl, [NAME], timeout=10)  # type: ignore[arg-type]
    assert kubectl.calls == 3


def test_a_crd_never_established_fails_naming_it() -> None:
    kubectl = FakeKubectl(_crd([{"type": "Established", "status": "False"}]))
    with pytest.raises(CrdsError, match=r"not Established within 0s: .*kubevirts\.kubevirt\.io"):
        wait_established(kubectl, [NAME], timeout=0)  # type: ignore[arg-type]
