"""Lifecycle commands call the right subresource with the kubeconfig's context and namespace."""

from __future__ import annotations

import json
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml
from virtctl.cli import main

if TYPE_CHECKING:
    from conftest import LoopbackCert


class FakeServer:
    """An HTTPS server recording requests; answers with `reply` (status, body)."""

    def __init__(self, cert: LoopbackCert) -> None:
        self.cert_pem = cert.pem
        self.requests: list[tuple[str, str, Any, str | None]] = []
        self.reply: tuple[int, Any] = (202, None)
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                outer.requests.append(
                    (
                        self.command,
                        self.path,
                        json.loads(raw) if raw else None,
                        self.headers.get("Authorization"),
                    )
                )
                status, body = outer.reply
                data = json.dumps(body).encode() if body is not None else b""
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_PUT = do_GET = _serve  # noqa: N815

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(str(cert.cert), str(cert.key))
        self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


@pytest.fixture
def server(loopback_cert: LoopbackCert) -> Iterator[FakeServer]:
    fake = FakeServer(loopback_cert)
    yield fake
    fake.httpd.shutdown()


@pytest.fixture
def kubeconfig(tmp_path: Path, server: FakeServer) -> Path:
    import base64

    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "main",
        "clusters": [
            {
                "name": "c",
                "cluster": {
                    "server": f"https://127.0.0.1:{server.port}",
                    "certificate-authority-data": base64.b64encode(server.cert_pem).decode(),
                },
            }
        ],
        "users": [{"name": "u", "user": {"token": "secret-token"}}],
        "contexts": [
            {"name": "main", "context": {"cluster": "c", "user": "u", "namespace": "team-a"}},
            {"name": "other", "context": {"cluster": "c", "user": "u"}},
        ],
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


BASE = "/apis/subresources.kubevirt.io/v1/namespaces"


def test_start_uses_context_namespace_and_token(
    server: FakeServer, kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["start", "vm1", "--kubeconfig", str(kubeconfig)]) == 0
    assert server.requests == [
        ("PUT", f"{BASE}/team-a/virtualmachines/vm1/start", {}, "Bearer secret-token")
    ]
    assert "VM vm1 was scheduled to start" in capsys.readouterr().out


def test_stop_dry_run_grace_period_and_context(server: FakeServer, kubeconfig: Path) -> None:
    args = [
        "stop",
        "vm1",
        "--kubeconfig",
        str(kubeconfig),
        "--context",
        "other",
        "--grace-period",
        "0",
        "--force",
        "--dry-run",
    ]
    assert main(args) == 0
    assert server.requests[0][1:3] == (
        f"{BASE}/default/virtualmachines/vm1/stop",
        {"dryRun": ["All"], "gracePeriod": 0},
    )


@pytest.mark.parametrize("command", ["stop", "restart"])
@pytest.mark.parametrize("flags", [["--grace-period", "5"], ["--force"]])
def test_force_and_grace_period_only_together(
    server: FakeServer,
    kubeconfig: Path,
    capsys: pytest.CaptureFixture[str],
    command: str,
    flags: list[str],
) -> None:
    assert main([command, "vm1", "--kubeconfig", str(kubeconfig), *flags]) == 2
    assert "Must both use --force=true and set --grace-period." in capsys.readouterr().err
    assert server.requests == []


def test_forced_restart_sends_the_grace_period(server: FakeServer, kubeconfig: Path) -> None:
    argv = ["restart", "vm1", "--force", "--grace-period", "0", "--kubeconfig", str(kubeconfig)]
    assert main(argv) == 0
    assert server.requests[0][1:3] == (
        f"{BASE}/team-a/virtualmachines/vm1/restart",
        {"gracePeriodSeconds": 0},
    )


def test_reset_is_scheduled_as_upstream_says(
    server: FakeServer, kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["reset", "vm1", "--kubeconfig", str(kubeconfig)]) == 0
    assert server.requests[0][:2] == ("PUT", f"{BASE}/team-a/virtualmachineinstances/vm1/reset")
    assert capsys.readouterr().out == "VMI vm1 was scheduled to reset\n"


def test_version_asks_the_server(
    server: FakeServer, kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server.reply = (200, {"gitVersion": "v9.9.9-test", "platform": "linux/amd64"})
    assert main(["version", "--kubeconfig", str(kubeconfig)]) == 0
    out = capsys.readouterr().out
    assert "Client Version: v0.1.0" in out
    assert "Server Version: v9.9.9-test (linux/amd64)" in out
    assert server.requests[0][:2] == ("GET", "/apis/subresources.kubevirt.io/v1/version")


def test_version_without_a_server_prints_the_client_and_fails(
    kubeconfig: Path, server: FakeServer, capsys: pytest.CaptureFixture[str]
) -> None:
    server.reply = (503, {"kind": "Status", "message": "down", "reason": "ServiceUnavailable"})
    assert main(["version", "--kubeconfig", str(kubeconfig)]) == 1
    captured = capsys.readouterr()
    assert captured.out.startswith("Client Version: ")
    assert "error getting the server version: down" in captured.err


def test_server_refusal_is_one_clear_line(
    server: FakeServer, kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server.reply = (
        409,
        {"kind": "Status", "message": "VM is already running", "reason": "Conflict", "code": 409},
    )
    assert main(["start", "vm1", "-n", "x", "--kubeconfig", str(kubeconfig)]) == 1
    err = capsys.readouterr().err.strip()
    assert err == "virtctl: error starting VirtualMachine vm1: VM is already running (409 Conflict)"


@pytest.mark.parametrize(
    ("argv", "method", "tail"),
    [
        (["restart", "vm1"], "PUT", "virtualmachines/vm1/restart"),
        (["migrate", "vm1"], "PUT", "virtualmachines/vm1/migrate"),
        (["pause", "vmi", "vm1"], "PUT", "virtualmachineinstances/vm1/pause"),
        (["unpause", "vm", "vm1"], "PUT", "virtualmachineinstances/vm1/unpause"),
        (["soft-reboot", "vm1"], "PUT", "virtualmachineinstances/vm1/softreboot"),
        (["reset", "vm1"], "PUT", "virtualmachineinstances/vm1/reset"),
    ],
)
def test_each_command_hits_its_subresource(
    server: FakeServer, kubeconfig: Path, argv: list[str], method: str, tail: str
) -> None:
    assert main([*argv, "--kubeconfig", str(kubeconfig)]) == 0
    assert server.requests[0][:2] == (method, f"{BASE}/team-a/{tail}")


def test_guestosinfo_and_expand_print_the_answer(
    server: FakeServer, kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server.reply = (200, {"os": {"name": "Fedora"}})
    assert main(["guestosinfo", "vm1", "--kubeconfig", str(kubeconfig)]) == 0
    assert json.loads(capsys.readouterr().out) == {"os": {"name": "Fedora"}}
    server.reply = (200, {"kind": "VirtualMachine", "spec": {}})
    assert main(["expand", "--vm", "vm1", "--kubeconfig", str(kubeconfig)]) == 0
    assert yaml.safe_load(capsys.readouterr().out)["kind"] == "VirtualMachine"


@pytest.mark.parametrize(
    ("command", "subresource"),
    [("guestosinfo", "guestosinfo"), ("userlist", "userlist"), ("fslist", "filesystemlist")],
)
def test_guest_agent_reports_are_printed_as_json(
    server: FakeServer,
    kubeconfig: Path,
    capsys: pytest.CaptureFixture[str],
    command: str,
    subresource: str,
) -> None:
    answer = {"metadata": {}, "items": [{"userName": "root"}]}
    server.reply = (200, answer)
    assert main([command, "vm1", "--kubeconfig", str(kubeconfig)]) == 0
    assert server.requests[0][:2] == (
        "GET",
        f"{BASE}/team-a/virtualmachineinstances/vm1/{subresource}",
    )
    out = capsys.readouterr().out
    assert json.loads(out) == answer
    assert out.startswith('{\n  "metadata"')  # indented, as upstream's MarshalIndent


def test_a_vmi_without_agent_is_reported_with_the_servers_words(
    server: FakeServer, kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server.reply = (409, {"kind": "Status", "message": "VMI does not have guest agent connected"})
    assert main(["fslist", "vm1", "--kubeconfig", str(kubeconfig)]) == 1
    err = capsys.readouterr().err
    assert "error getting filesystem list of VMI vm1" in err
    assert "VMI does not have guest agent connected" in err


def test_unreachable_cluster_is_reported(
    tmp_path: Path, kubeconfig: Path, server: FakeServer, capsys: pytest.CaptureFixture[str]
) -> None:
    server.httpd.shutdown()
    server.httpd.server_close()
    assert main(["start", "vm1", "--kubeconfig", str(kubeconfig)]) == 1
    assert "cannot reach the cluster" in capsys.readouterr().err


def test_expand_file_puts_the_vm_to_expand_vm_spec(
    server: FakeServer, kubeconfig: Path, tmp_path: Path
) -> None:
    vm = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": "x"},
        "spec": {},
    }
    (tmp_path / "vm.yaml").write_text(yaml.safe_dump(vm))
    server.reply = (200, vm)
    assert main(["expand", "-f", str(tmp_path / "vm.yaml"), "--kubeconfig", str(kubeconfig)]) == 0
    assert server.requests[0][:3] == ("PUT", f"{BASE}/team-a/expand-vm-spec", vm)


def test_expand_file_that_is_not_a_vm(
    server: FakeServer, kubeconfig: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "pod.yaml").write_text("kind: Pod\n")
    assert main(["expand", "-f", str(tmp_path / "pod.yaml"), "--kubeconfig", str(kubeconfig)]) == 1
    assert "must hold one VirtualMachine" in capsys.readouterr().err
    assert server.requests == []


@pytest.mark.parametrize(
    ("cluster_fields", "said"),
    [
        ({"certificate-authority": "missing.crt"}, "certificate-authority of context 'main'"),
        ({"certificate-authority-data": "bm90IGEgY2VydA=="}, "certificate-authority of context"),
        ({"certificate-authority-data": "abc"}, "certificate-authority-data of context 'main'"),
    ],
)
def test_unusable_tls_material_in_the_kubeconfig_names_the_field(
    server: FakeServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    cluster_fields: dict[str, str],
    said: str,
) -> None:
    config = {
        "current-context": "main",
        "clusters": [
            {
                "name": "c",
                "cluster": {"server": f"https://127.0.0.1:{server.port}"} | cluster_fields,
            }
        ],
        "users": [{"name": "u", "user": {}}],
        "contexts": [{"name": "main", "context": {"cluster": "c", "user": "u"}}],
    }
    path = tmp_path / "bad-kubeconfig"
    path.write_text(yaml.safe_dump(config))
    assert main(["start", "vm1", "--kubeconfig", str(path)]) == 1
    err = capsys.readouterr().err
    assert said in err
    assert "internal error" not in err
    assert server.requests == []


def test_expand_file_keeps_timestamps_as_strings(
    server: FakeServer, kubeconfig: Path, tmp_path: Path
) -> None:
    # `kubectl get vm -o yaml` output carries timestamps; YAML would make them datetimes.
    (tmp_path / "vm.yaml").write_text(
        "apiVersion: kubevirt.io/v1\nkind: VirtualMachine\n"
        "metadata: {name: x, creationTimestamp: 2024-05-01T10:00:00Z}\nspec: {}\n"
    )
    server.reply = (200, {"kind": "VirtualMachine"})
    assert main(["expand", "-f", str(tmp_path / "vm.yaml"), "--kubeconfig", str(kubeconfig)]) == 0
    sent = server.requests[0][2]
    assert sent["metadata"]["creationTimestamp"] == "2024-05-01T10:00:00Z"


def test_expand_file_that_is_not_text_is_one_line(
    server: FakeServer, kubeconfig: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "vm.yaml").write_bytes(b"kind: VirtualMachine\nx: \xff\xfe\n")
    assert main(["expand", "-f", str(tmp_path / "vm.yaml"), "--kubeconfig", str(kubeconfig)]) == 1
    err = capsys.readouterr().err
    assert "not UTF-8" in err
    assert "internal error" not in err
    assert server.requests == []


def test_a_kubeconfig_that_is_not_text_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "kubeconfig").write_bytes(b"\xff\xfe\x00garbage")
    assert main(["start", "vm1", "--kubeconfig", str(tmp_path / "kubeconfig")]) == 1
    err = capsys.readouterr().err
    assert "is not UTF-8 text" in err
    assert "internal error" not in err


def test_insecure_skip_tls_verify_trusts_an_unknown_certificate(
    server: FakeServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))  # --server alone
    url = f"https://127.0.0.1:{server.port}"
    assert main(["start", "vm1", "--server", url, "--token", "t"]) == 1
    assert "cannot reach the cluster" in capsys.readouterr().err  # self-signed: refused
    assert (
        main(["start", "vm1", "--server", url, "--token", "t", "--insecure-skip-tls-verify"]) == 0
    )
    assert server.requests[-1][1:] == (f"{BASE}/default/virtualmachines/vm1/start", {}, "Bearer t")
