"""virtctl finds its cluster as kubectl does: kubeconfig files and kubectl's global flags."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml
from aiohttp import web
from virtctl.commands.subresource import parse_duration

if TYPE_CHECKING:
    from conftest import Run

BASE = "/apis/subresources.kubevirt.io/v1/namespaces"


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, list[str]]


@dataclass
class ApiServer:
    """A plain-HTTP aiohttp server on 127.0.0.1 in its own thread, recording requests."""

    url: str = ""
    requests: list[Seen] = field(default_factory=list)

    def header(self, name: str) -> list[str]:
        return self.requests[-1].headers.get(name.lower(), [])


@pytest.fixture
def apiserver() -> Iterator[ApiServer]:
    server = ApiServer()
    loop = asyncio.new_event_loop()
    started = threading.Event()
    stop = asyncio.Event()

    async def handle(request: web.Request) -> web.Response:
        headers: dict[str, list[str]] = {}
        for name, value in request.headers.items():
            headers.setdefault(name.lower(), []).append(value)
        server.requests.append(Seen(request.method, request.path, headers))
        return web.Response(status=202)

    async def serve() -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", handle)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        server.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
        started.set()
        await stop.wait()
        await runner.cleanup()

    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),), daemon=True)
    thread.start()
    assert started.wait(10)
    yield server
    loop.call_soon_threadsafe(stop.set)
    thread.join(10)
    loop.close()


def write(path: Path, config: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture
def two_files(tmp_path: Path, apiserver: ApiServer, monkeypatch: pytest.MonkeyPatch) -> Path:
    """KUBECONFIG = contexts.yaml:clusters.yaml (the contexts in one, the rest in the other)."""
    contexts = write(
        tmp_path / "contexts.yaml",
        {
            "current-context": "main",
            "contexts": [
                {"name": "main", "context": {"cluster": "c", "user": "u", "namespace": "team-a"}},
                {"name": "other", "context": {"cluster": "c", "user": "robot"}},
            ],
        },
    )
    clusters = write(
        tmp_path / "clusters.yaml",
        {
            "clusters": [{"name": "c", "cluster": {"server": apiserver.url}}],
            "users": [
                {"name": "u", "user": {"token": "alice-token"}},
                {"name": "robot", "user": {"token": "robot-token"}},
            ],
        },
    )
    monkeypatch.setenv("KUBECONFIG", f"{contexts}{os.pathsep}{clusters}")
    return contexts


def test_merged_kubeconfig_list(run: Run, apiserver: ApiServer, two_files: Path) -> None:
    result = run("start", "vm1")
    assert (result.code, result.out) == (0, "VM vm1 was scheduled to start\n")
    assert apiserver.requests[-1].path == f"{BASE}/team-a/virtualmachines/vm1/start"
    assert apiserver.header("Authorization") == ["Bearer alice-token"]


def test_context_flag_picks_another_context(
    run: Run, apiserver: ApiServer, two_files: Path
) -> None:
    assert run("stop", "vm1", "--context", "other").code == 0
    assert apiserver.requests[-1].path == f"{BASE}/default/virtualmachines/vm1/stop"
    assert apiserver.header("Authorization") == ["Bearer robot-token"]


@pytest.mark.parametrize(
    ("argv", "namespace"),
    [
        (["start", "vm1", "-n", "flag-ns"], "flag-ns"),  # -n first
        (["--namespace", "flag-ns", "start", "vm1"], "flag-ns"),  # before the command too
        (["start", "vm1"], "team-a"),  # then the context's
        (["start", "vm1", "--context", "other"], "default"),  # then default
    ],
)
def test_namespace_defaults_as_kubectl(
    run: Run, apiserver: ApiServer, two_files: Path, argv: list[str], namespace: str
) -> None:
    assert run(*argv).code == 0
    assert apiserver.requests[-1].path == f"{BASE}/{namespace}/virtualmachines/vm1/start"


def test_exec_plugin_gives_the_token(run: Run, apiserver: ApiServer, tmp_path: Path) -> None:
    credential = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "kind": "ExecCredential",
        "status": {"token": "from-the-plugin"},
    }
    plugin = tmp_path / "plugin" / "get-token"
    plugin.parent.mkdir()
    plugin.write_text(f"#!{sys.executable}\nprint({json.dumps(json.dumps(credential))})\n")
    plugin.chmod(0o755)
    exec_user = {"apiVersion": "client.authentication.k8s.io/v1", "command": "plugin/get-token"}
    config = write(
        tmp_path / "config",
        {
            "current-context": "x",
            "clusters": [{"name": "c", "cluster": {"server": apiserver.url}}],
            "users": [{"name": "u", "user": {"exec": exec_user}}],
            "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        },
    )
    assert run("pause", "vmi", "vm1", "--kubeconfig", str(config)).code == 0
    assert apiserver.header("Authorization") == ["Bearer from-the-plugin"]


def test_server_and_token_flags_override(
    run: Run, apiserver: ApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = write(
        tmp_path / "config",
        {
            "current-context": "x",
            "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:9"}}],
            "users": [{"name": "u", "user": {"token": "kubeconfig-token"}}],
            "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u", "namespace": "k"}}],
        },
    )
    monkeypatch.setenv("KUBECONFIG", str(config))
    assert run("restart", "vm1", "--server", apiserver.url, "--token", "flag-token").code == 0
    assert apiserver.requests[-1].path == f"{BASE}/k/virtualmachines/vm1/restart"
    assert apiserver.header("Authorization") == ["Bearer flag-token"]
    # No kubeconfig at all: --server alone is enough, as for kubectl.
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    assert run("-s", apiserver.url, "start", "vm2").code == 0
    assert apiserver.requests[-1].path == f"{BASE}/default/virtualmachines/vm2/start"
    assert apiserver.header("Authorization") == []


def test_as_sends_impersonation_headers(run: Run, apiserver: ApiServer, two_files: Path) -> None:
    assert run("soft-reboot", "vm1", "--as", "jane", "--as-group", "devs").code == 0
    assert apiserver.header("Impersonate-User") == ["jane"]
    assert apiserver.header("Impersonate-Group") == ["devs"]
    assert apiserver.header("Authorization") == ["Bearer alice-token"]


def test_as_group_without_as_is_refused(run: Run, apiserver: ApiServer, two_files: Path) -> None:
    result = run("start", "vm1", "--as-group", "devs")
    assert result.code == 1
    assert "needs a user to impersonate (--as)" in result.err
    assert apiserver.requests == []


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (None, "no such file"),
        ("clusters: [\n", "is not YAML at line 2"),
        ("just text\n", "is not a kubeconfig"),
        ("current-context: gone\n", "no context named 'gone'"),
    ],
)
def test_unusable_kubeconfig_is_one_line_naming_the_file(
    run: Run, tmp_path: Path, content: str | None, said: str
) -> None:
    path = tmp_path / "kubeconfig"
    if content is not None:
        path.write_text(content)
    result = run("start", "vm1", "--kubeconfig", str(path))
    assert result.code == 1
    assert result.err.count("\n") == 1
    assert f"kubeconfig {path}" in result.err
    assert said in result.err
    assert "internal error" not in result.err


def test_no_kubeconfig_anywhere(run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    result = run("start", "vm1")
    assert result.code == 1
    assert result.err.startswith("virtctl: error starting VirtualMachine vm1: no kubeconfig (")


def test_verbosity_six_logs_files_and_requests_to_stderr(
    run: Run, apiserver: ApiServer, two_files: Path
) -> None:
    result = run("start", "vm1", "-v", "6")
    assert result.out == "VM vm1 was scheduled to start\n"
    assert f"Config loaded from file: {two_files}, " in result.err
    assert f"PUT {apiserver.url}{BASE}/team-a/virtualmachines/vm1/start OK in " in result.err
    assert "Config loaded" not in run("start", "vm1").err


@pytest.mark.parametrize(
    ("text", "seconds"), [("0", 0.0), ("5", 5.0), ("1m30s", 90.0), ("250ms", 0.25), ("1.5h", 5400)]
)
def test_request_timeout_takes_kubectl_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


def test_request_timeout_that_is_no_duration_is_a_usage_error(run: Run) -> None:
    result = run("start", "vm1", "--request-timeout", "soon")
    assert result.code == 2
    assert "invalid duration 'soon'" in result.err


@pytest.mark.parametrize(
    ("program", "usage"), [("virtctl", "virtctl"), ("kubectl-virt", "kubectl virt")]
)
def test_usage_names_the_program_as_run(program: str, usage: str) -> None:
    executable = Path(sys.executable).parent / program
    done = subprocess.run(
        [str(executable), "start", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: {usage} start ")
