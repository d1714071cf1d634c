"""A real service process exits 0 on SIGTERM/SIGINT after logging its shutdown as JSON."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import textwrap
import urllib.request

import pytest

SERVICE = textwrap.dedent(
    """
    import asyncio, sys
    from aiohttp import web
    import service_kit as sk

    sk.configure_logging("info", component="demo")
    health = sk.Health()
    app = web.Application()
    sk.add_health_routes(app, health)
    sk.add_metrics_route(app, sk.MetricsRegistry())

    async def announce(stop: asyncio.Event) -> None:
        host, port = runner.addresses[0]
        print(port, flush=True)
        await stop.wait()

    runner = sk.ServiceRunner(
        app, [sk.TCPListener("127.0.0.1", 0)], background={"announce": announce}, health=health
    )
    raise SystemExit(sk.run_service(runner))
    """
)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_stops_process_cleanly(sig: signal.Signals) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVICE],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as response:
            assert response.status == 200
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    events = [json.loads(line) for line in err.splitlines()]
    assert [e["msg"] for e in events] == [
        "service started",
        "signal received, shutting down",
        "service stopped",
    ]
    assert events[-1]["reason"] == sig.name
    assert all(e["component"] == "demo" for e in events)


def test_port_in_use_is_one_log_line_and_exit_2() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        script = SERVICE.replace(
            'sk.TCPListener("127.0.0.1", 0)', f'sk.TCPListener("127.0.0.1", {port})'
        )
        done = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, timeout=30, check=False
        )
    assert done.returncode == 2, done.stderr
    [event] = [json.loads(line) for line in done.stderr.splitlines()]
    assert event["msg"] == "cannot start the service"
    assert str(port) in event["error"]


BACKGROUND_ONLY = textwrap.dedent(
    """
    import asyncio, sys
    import service_kit as sk

    sk.configure_logging("info", component="demo")

    async def announce(stop: asyncio.Event) -> None:
        print("aiohttp" in sys.modules, flush=True)
        await stop.wait()

    runner = sk.ServiceRunner(None, [], background={"announce": announce})
    raise SystemExit(sk.run_service(runner))
    """
)


def test_a_service_without_http_runs_and_stops_without_loading_aiohttp() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", BACKGROUND_ONLY],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    try:
        assert proc.stdout.readline().strip() == "False"
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=10)
    finally:
        proc.kill()
    assert proc.returncode == 0
    stopped = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    assert stopped[-1]["msg"] == "service stopped"


def test_listeners_without_an_app_are_refused() -> None:
    import service_kit as sk

    with pytest.raises(ValueError, match="listeners need an app"):
        sk.ServiceRunner(None, [sk.TCPListener("127.0.0.1", 0)])
