"""The PrometheusRule is valid for Prometheus (`promtool check rules`), its alerts behave
as upstream's on the project's own rule tests (`promtool test rules`), it carries
upstream's alert names for the components that exist, and the manifests are fresh."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from kubevirt_api.monitoring import manifests
from kubevirt_api.monitoring.rules import alerts, prometheus_rule, rule_groups

ROOT = Path(__file__).resolve().parents[3]
TESTS = Path(__file__).parent / "data" / "prom-rules-tests.yaml"

# Upstream's alerts of virt-api, virt-controller and virt-handler (alerts/*.go), and the VM
# alert whose metric exists here.
UPSTREAM_COMPONENT_ALERTS = {
    "VirtAPIDown",
    "LowReadyVirtAPICount",
    "NoReadyVirtAPI",
    "LowVirtAPICount",
    "VirtApiRESTErrorsBurst",
    "LowReadyVirtControllersCount",
    "NoReadyVirtController",
    "NoLeadingVirtController",
    "VirtControllerDown",
    "LowVirtControllersCount",
    "VirtLauncherPodsStuckFailed",
    "VirtControllerRESTErrorsBurst",
    "VirtHandlerDown",
    "LowReadyVirtHandlerCount",
    "NoReadyVirtHandler",
    "OrphanedVirtualMachineInstances",
    "VirtHandlerDaemonSetRolloutFailing",
    "VirtHandlerRESTErrorsBurst",
    "OutdatedVirtualMachineInstanceWorkloads",
}


def _promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        message = "promtool is missing: install Debian's `prometheus` (make setup)"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(message)
        pytest.skip(message)
    return found


def _write_rules(tmp_path: Path) -> Path:
    rules = tmp_path / "rules.verify"
    rules.write_text(yaml.safe_dump({"groups": rule_groups("ci")}, sort_keys=False))
    return rules


def test_promtool_accepts_the_rules(tmp_path: Path) -> None:
    rules = _write_rules(tmp_path)
    done = subprocess.run(
        [_promtool(), "check", "rules", str(rules)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_alerts_pass_the_projects_promtool_rule_tests(tmp_path: Path) -> None:
    _write_rules(tmp_path)
    shutil.copy(TESTS, tmp_path / TESTS.name)
    done = subprocess.run(
        [_promtool(), "test", "rules", TESTS.name],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_alert_names_are_upstreams_for_the_components_that_exist() -> None:
    assert {a.name for a in alerts("kubevirt")} == UPSTREAM_COMPONENT_ALERTS


def test_every_alert_has_a_runbook_severity_and_the_kubevirt_labels() -> None:
    for rule in prometheus_rule("kubevirt")["spec"]["groups"][1]["rules"]:
        assert rule["annotations"]["runbook_url"].endswith("/" + rule["alert"])
        assert rule["labels"]["severity"] in {"critical", "warning", "info"}
        assert rule["labels"]["kubernetes_operator_part_of"] == "kubevirt"


def test_committed_monitoring_manifests_are_fresh() -> None:
    assert manifests.stale_files(ROOT / "manifests" / "monitoring") == [], (
        "manifests/monitoring is stale: run `uv run python -m kubevirt_api.monitoring.manifests`"
    )
