"""virt-operator's flags."""

from __future__ import annotations

import pytest
from virt_operator.app import main, parse_args


def test_defaults_come_from_the_pod(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAMESPACE", "kv-system")
    monkeypatch.setenv("OPERATOR_IMAGE", "reg.example/kv/virt-operator:v3")
    settings = parse_args([])
    assert settings.namespace == "kv-system"
    assert settings.image == "reg.example/kv/virt-operator:v3"
    assert settings.leader_elect is True
    assert (settings.port, settings.webhook_port) == (8443, 8444)


def test_a_bad_port_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--webhook-port", "70000"]) == 2
    assert "--webhook-port: 70000 is not a port number" in capsys.readouterr().err
