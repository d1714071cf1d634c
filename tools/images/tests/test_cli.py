"""kv-images refuses what it cannot do (unknown names, no registry to push to) saying why."""

from __future__ import annotations

from pathlib import Path

import pytest
from kv_images.cli import main
from kv_images.registry import ENDPOINT_FILE, RegistryEndpoint


def test_unknown_image_name_lists_valid_names(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["build", "--no-import", "virt-nonsense"]) == 1
    err = capsys.readouterr().err
    assert "unknown image(s): virt-nonsense" in err
    assert "virt-launcher" in err
    assert "guest-kernel-boot" in err


def test_list_shows_bases_and_services(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "virt-launcher" in out
    assert "(FROM launcher-base)" in out


@pytest.mark.parametrize(
    ("recorded", "named"),
    [
        # No cluster registry: say what starts one, or how to name another.
        (None, ("kv-cluster up", "--registry HOST[:PORT]")),
        # One recorded but not answering (a closed port): say where to look.
        ("127.0.0.1:1", ("127.0.0.1:1", "kv-cluster status")),
    ],
)
def test_push_to_a_local_registry_that_is_not_there_names_the_remedy(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    recorded: str | None,
    named: tuple[str, str],
) -> None:
    state = tmp_path / "cluster"
    if recorded is not None:
        RegistryEndpoint(recorded).save(state / ENDPOINT_FILE)
    monkeypatch.setenv("KV_CLUSTER_STATE_DIR", str(state))
    assert main(["push", "pause"]) == 1
    err = capsys.readouterr().err
    for words in named:
        assert words in err
