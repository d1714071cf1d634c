"""manifests/virt-api matches the webhook table, and registration follows the issue's rules."""

from __future__ import annotations

from pathlib import Path

import yaml
from virt_api.manifests import render

MANIFESTS = (
    Path(__file__).resolve().parents[3]
    / "services/virt-operator/src/virt_operator/components/virt-api"
)


def test_generated_manifests_are_fresh() -> None:
    for name, text in render().items():
        assert (MANIFESTS / name).read_text() == text, (
            f"{name} is stale: run `uv run python -m virt_api.manifests`"
        )


def test_every_webhook_fails_closed_quickly_without_side_effects() -> None:
    docs = list(yaml.safe_load_all((MANIFESTS / "webhooks.yaml").read_text()))
    assert {d["metadata"]["name"] for d in docs} == {"virt-api-mutator", "virt-api-validator"}
    hooks = [h for d in docs for h in d["webhooks"]]
    assert len(hooks) == 21
    for hook in hooks:
        # The eviction interceptor marks the VMI, and does so as a dry run on a dry run.
        writes = hook["name"] == "virt-launcher-eviction-interceptor.kubevirt.io"
        assert (hook["failurePolicy"], hook["timeoutSeconds"], hook["sideEffects"]) == (
            "Fail",
            10,
            "NoneOnDryRun" if writes else "None",
        )


def test_apiservice_is_v1_subresources() -> None:
    names = [
        d["metadata"]["name"]
        for d in yaml.safe_load_all((MANIFESTS / "apiservice.yaml").read_text())
    ]
    assert "v1.subresources.kubevirt.io" in names
