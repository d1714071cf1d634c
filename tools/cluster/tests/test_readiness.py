"""`up` quotes why a KubeVirt pod is not ready: its readiness body or the kubelet's reason."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import pytest
from kv_cluster.readiness import Probe, fetch_probe, pod_reason

NOT_SYNCED = {
    "status": "failed",
    "checks": {"leader": {"ok": False, "message": "virtualmachines/*: not synced (404)"}},
}


def _pod(container_status: dict[str, Any], probe_port: Any = 8443) -> dict[str, Any]:
    return {
        "metadata": {"name": "virt-controller-abc"},
        "spec": {
            "containers": [
                {
                    "name": "virt-controller",
                    "ports": [{"name": "metrics", "containerPort": 8443}],
                    "readinessProbe": {"httpGet": {"path": "/readyz", "port": probe_port}},
                }
            ]
        },
        "status": {
            "phase": "Running",
            "podIP": "127.0.0.1",
            "conditions": [{"type": "Ready", "status": "False"}],
            "containerStatuses": [{"name": "virt-controller", **container_status}],
        },
    }


def test_a_ready_pod_has_no_reason() -> None:
    pod = _pod({"ready": True, "state": {"running": {}}})
    pod["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    assert pod_reason(pod) is None


def test_a_running_unready_pod_is_explained_by_its_readiness_body() -> None:
    asked: list[Probe] = []

    def fetch(probe: Probe) -> str:
        asked.append(probe)
        return f"/readyz 503: {json.dumps(NOT_SYNCED)}"

    for port in (8443, "metrics"):  # a number, or the container port's name
        asked.clear()
        reason = pod_reason(_pod({"ready": False, "state": {"running": {}}}, port), fetch)
        assert asked == [Probe("HTTP", "127.0.0.1", 8443, "/readyz")]
        assert reason is not None
        assert reason.startswith("pod virt-controller-abc: virt-controller: /readyz 503:")
        assert "virtualmachines/*: not synced (404)" in reason


def test_a_waiting_container_gives_the_kubelets_reason_and_last_exit() -> None:
    status = {
        "ready": False,
        "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s"}},
        "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}},
    }
    assert pod_reason(_pod(status), lambda p: pytest.fail("no probe for a waiting one")) == (
        "pod virt-controller-abc: virt-controller: CrashLoopBackOff (back-off 40s); "
        "last exit 1 Error"
    )


@contextlib.contextmanager
def closed_port() -> Iterator[int]:
    """A local port bound but not listening: a connection to it is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


@pytest.fixture
def readyz_server() -> Iterator[int]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = json.dumps(NOT_SYNCED).encode()
            self.send_response(503 if self.path == "/readyz" else 404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_the_probe_is_fetched_over_http_with_status_and_body(readyz_server: int) -> None:
    text = fetch_probe(Probe("HTTP", "127.0.0.1", readyz_server, "/readyz"))
    assert text == f"/readyz 503: {json.dumps(NOT_SYNCED)}"


def test_an_unreachable_probe_says_so() -> None:
    with closed_port() as port:
        text = fetch_probe(Probe("HTTP", "127.0.0.1", port, "/readyz"), timeout=1)
    assert text.startswith("/readyz: ConnectionRefusedError")
