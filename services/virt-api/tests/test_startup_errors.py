"""virt-api refuses to start on bad credentials with one line on stderr, no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from virt_api.server import main


def _start(argv: list[str], tmp_path: Path) -> list[str]:
    (tmp_path / "tls.crt").write_text("unused: the kubeconfig is read first\n")
    return ["--tls-cert", str(tmp_path / "tls.crt"), "--tls-key", str(tmp_path / "tls.crt"), *argv]


@pytest.mark.parametrize(
    ("kubeconfig", "said"),
    [
        ("clusters: [\n", "not YAML"),
        ("- a list\n", "not a kubeconfig"),
        (
            "current-context: c\n"
            "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
            "clusters: [{name: k, cluster: {}}]\n"
            "users: [{name: u, user: {}}]\n",
            "cluster 'k' has no server",
        ),
        ("current-context: gone\ncontexts: []\n", "no context named 'gone'"),
    ],
)
def test_an_unusable_kubeconfig_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kubeconfig: str, said: str
) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(kubeconfig)
    assert main(_start(["--kubeconfig", str(path)], tmp_path)) == 1
    err = capsys.readouterr().err
    assert err.startswith("virt-api: ")
    assert said in err
    assert "Traceback" not in err


def test_outside_a_pod_without_kubeconfig_says_what_to_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.kube/config either
    assert main(_start([], tmp_path)) == 1
    assert "pass --kubeconfig" in capsys.readouterr().err
