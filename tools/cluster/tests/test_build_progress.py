"""A build reports progress, logs everything, and marks the cache complete only on success.

A stand-in `go` on PATH plays the toolchain, so the test runs without compiling anything.
"""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path

import pytest
from kv_cluster.gobuild import MARKER, BuildError, GoBuild, ensure_built

_FAKE_GO = """#!/bin/sh
[ -n "$FAKE_GO_ARGS" ] && echo "$@" >> "$FAKE_GO_ARGS"
case "$1" in
  version) echo "go version go0.0 fake"; exit 0;;
  list) for i in 1 2 3 4 5; do echo "example.com/pkg$i"; done; exit 0;;
  build)
    for i in 1 2 3; do echo "example.com/pkg$i" >&2; done
    [ -n "$FAKE_GO_LINK_SECONDS" ] && sleep "$FAKE_GO_LINK_SECONDS"  # a silent link step
    if [ -n "$FAKE_GO_FAIL" ]; then echo "pkg3.go:1: syntax error" >&2; exit 1; fi
    mkdir -p ../bin && for b in alpha beta; do printf '#!/bin/sh\\n' > ../bin/$b; chmod +x ../bin/$b; done
    exit 0;;
esac
exit 2
"""


@pytest.fixture
def spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> GoBuild:
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "go").write_text(_FAKE_GO)
    (tools / "go").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}:/usr/bin:/bin")
    build = GoBuild(
        name="demo",
        version="v1.0.0",
        requires=(("example.com/demo", "v1.0.0"),),
        packages=("example.com/demo/cmd/alpha", "example.com/demo/cmd/beta"),
    )
    src = build.root(tmp_path / "cache") / "src"
    src.mkdir(parents=True)
    for name in ("go.mod", "go.sum", "tools.go"):  # an earlier run resolved the module
        (src / name).write_text("")
    return build


def test_build_tags_reach_the_package_count_and_the_build(
    spec: GoBuild, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = tmp_path / "go-calls"
    monkeypatch.setenv("FAKE_GO_ARGS", str(calls))
    tagged = dataclasses.replace(spec, tags=("remove_all_sd", "enable_kubernetes_sd"))
    ensure_built(tagged, tmp_path / "cache", io.StringIO())
    runs = [line.split() for line in calls.read_text().splitlines()]
    [listed] = [argv for argv in runs if argv[0] == "list"]
    [built] = [argv for argv in runs if argv[0] == "build"]
    assert "-tags=remove_all_sd,enable_kubernetes_sd" in listed
    assert "-tags=remove_all_sd,enable_kubernetes_sd" in built


def test_a_successful_build_reports_logs_and_marks_complete(spec: GoBuild, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    out = io.StringIO()
    assert ensure_built(spec, cache, out) == spec.bin_dir(cache)
    said = out.getvalue()
    assert "building demo v1.0.0 (alpha, beta)" in said
    assert "built demo v1.0.0 in" in said
    assert "example.com/pkg3" in (spec.root(cache) / "build.log").read_text()
    marker = json.loads((spec.root(cache) / MARKER).read_text())
    assert marker["binaries"] == ["alpha", "beta"]
    assert spec.is_complete(cache)


def test_progress_counts_compiled_packages_against_the_graph(
    spec: GoBuild, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("kv_cluster.gobuild._REPORT_EVERY", 0.0)
    out = io.StringIO()
    ensure_built(spec, tmp_path / "cache", out)
    assert "demo: 3/5 packages compiled" in out.getvalue()


def test_progress_continues_while_the_build_is_silent(
    spec: GoBuild, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("kv_cluster.gobuild._REPORT_EVERY", 0.1)
    monkeypatch.setenv("FAKE_GO_LINK_SECONDS", "0.6")
    out = io.StringIO()
    ensure_built(spec, tmp_path / "cache", out)
    assert out.getvalue().count("demo: 3/5 packages compiled") >= 2


def test_a_failed_build_names_the_log_and_leaves_no_marker(
    spec: GoBuild, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_GO_FAIL", "1")
    cache = tmp_path / "cache"
    with pytest.raises(BuildError, match="syntax error") as failure:
        ensure_built(spec, cache, io.StringIO())
    assert str(spec.root(cache) / "build.log") in str(failure.value)
    assert not (spec.root(cache) / MARKER).exists()
    assert not spec.is_complete(cache)
