"""`kv-cluster up` on a host without the node's packages names them and changes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from kv_cluster import cli, cluster, nodehost


def test_up_names_missing_packages_before_touching_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state"
    monkeypatch.setenv("KV_CLUSTER_STATE_DIR", str(state))
    monkeypatch.setattr(cluster, "ensure_built", lambda *args, **kwargs: None)
    monkeypatch.setattr(
        nodehost,
        "_NEEDED",
        {"/nonexistent/usr/sbin/runc": "runc", "/nonexistent/usr/bin/containerd": "containerd"},
    )
    assert cli.main(["up", "--nodes", "1"]) == 2
    err = capsys.readouterr().err
    assert "containerd, runc" in err
    assert "apt-get install containerd runc" in err
    assert not state.exists()
