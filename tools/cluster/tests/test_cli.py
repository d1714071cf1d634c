"""The command line reports problems as one clear line and an exit code, never a traceback."""

from pathlib import Path

import pytest
from kv_cluster.cli import main


def test_status_of_a_missing_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("KV_CLUSTER_STATE_DIR", str(tmp_path / "none"))
    assert main(["status"]) == 3
    assert "no cluster" in capsys.readouterr().out


def test_a_bad_variable_is_named(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("KV_CLUSTER_PORT_BASE", "twelve")
    assert main(["status"]) == 2
    err = capsys.readouterr().err
    assert "KV_CLUSTER_PORT_BASE" in err
    assert "Traceback" not in err


def test_kubeconfig_path_is_printed_even_before_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("KV_CLUSTER_STATE_DIR", str(tmp_path))
    assert main(["kubeconfig"]) == 1
    assert capsys.readouterr().out.strip() == str(tmp_path / "kubeconfig" / "admin.conf")


def test_down_refuses_a_directory_that_is_not_a_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "precious.txt").write_text("keep me")
    monkeypatch.setenv("KV_CLUSTER_STATE_DIR", str(tmp_path))
    assert main(["down"]) == 2
    assert "refusing" in capsys.readouterr().err
    assert (tmp_path / "precious.txt").exists()


def test_changed_settings_of_an_existing_cluster_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from kv_cluster.config import ClusterConfig

    monkeypatch.setenv("KV_CLUSTER_STATE_DIR", str(tmp_path))
    ClusterConfig.from_env().save(tmp_path / "config.json")
    monkeypatch.setenv("KV_CLUSTER_PORT_BASE", "31000")
    assert main(["status"]) == 2
    assert "ports" in capsys.readouterr().err
