"""port-forward (--stdio and a local listener) and expose against a fake API server.

The fake serves upstream's portforward path as a websocket that echoes (port 22) or
closes with the handler's reason (any other port), and the REST calls expose makes.
"""

from __future__ import annotations

import asyncio
import os
import select
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from aiohttp import web
from kube_runtime import KubeClient
from kubernetes_asyncio.client import ApiClient, Configuration
from virtctl.commands.subresource import Cluster
from virtctl.portforwarding import serve_ports
from virtctl.targets import ForwardedPort, Target

if TYPE_CHECKING:
    from conftest import LoopbackCert, Run

REPO = Path(__file__).resolve().parents[3]
PF = "/apis/subresources.kubevirt.io/v1/namespaces/{ns}/{resource}/{name}/portforward/{port}/{protocol}"


class FakeApi:
    def __init__(self) -> None:
        self.requests: list[tuple[str, str, Any]] = []
        self.protocols: list[str | None] = []
        self.objects: dict[str, Any] = {}

    async def forward(self, request: web.Request) -> web.StreamResponse:
        self.requests.append(("WS", request.path, None))
        ws = web.WebSocketResponse(protocols=("plain.kubevirt.io",))
        await ws.prepare(request)
        self.protocols.append(ws.ws_protocol)
        if request.match_info["port"] != "22":
            port = request.match_info["port"]
            await ws.close(code=1011, message=f"dialing tcp 127.0.0.1:{port}: refused".encode())
            return ws
        async for message in ws:
            await ws.send_bytes(b"guest:" + message.data)
        return ws

    async def rest(self, request: web.Request) -> web.Response:
        body = await request.json() if request.can_read_body else None
        self.requests.append((request.method, request.path, body))
        if request.method == "GET":
            if request.path in self.objects:
                return web.json_response(self.objects[request.path])
            return web.json_response(
                {"kind": "Status", "code": 404, "reason": "NotFound", "message": "not found"},
                status=404,
            )
        return web.json_response(body, status=201)


@pytest.fixture
def fake(loopback_cert: LoopbackCert) -> Iterator[tuple[FakeApi, str]]:
    import ssl

    api = FakeApi()
    app = web.Application()
    app.router.add_get(PF.replace("{ns}", "{ns}"), api.forward)
    app.router.add_route("*", "/{tail:.*}", api.rest)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(str(loopback_cert.cert), str(loopback_cert.key))
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    holder: dict[str, Any] = {}

    async def start() -> None:
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
        await site.start()
        holder["runner"], holder["port"] = runner, runner.addresses[0][1]
        ready.set()

    thread = threading.Thread(target=lambda: (loop.run_until_complete(start()), loop.run_forever()))
    thread.start()
    ready.wait(10)
    yield api, f"https://127.0.0.1:{holder['port']}"
    asyncio.run_coroutine_threadsafe(holder["runner"].cleanup(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)


def _read(fd: int, size: int, timeout: float = 60.0) -> bytes:
    # Generous: a virtctl process starting on a loaded 2-core machine takes seconds.
    data = b""
    while len(data) < size:
        ready, _, _ = select.select([fd], [], [], timeout)
        assert ready, f"no output within {timeout}s (got {data!r})"
        chunk = os.read(fd, size - len(data))
        if not chunk:
            break
        data += chunk
    return data


def _virtctl(*argv: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "virtctl", *argv],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
    )


def test_stdio_carries_bytes_both_ways_like_a_proxy_command(fake: tuple[FakeApi, str]) -> None:
    api, server = fake
    proc = _virtctl(
        "port-forward",
        "--stdio=true",
        "vmi/vm1/ns2",
        "22",
        "-s",
        server,
        "--insecure-skip-tls-verify",
    )
    assert proc.stdin is not None
    assert proc.stdout is not None
    proc.stdin.write(b"SSH-2.0-OpenSSH\r\n")
    proc.stdin.flush()
    assert _read(proc.stdout.fileno(), 23) == b"guest:SSH-2.0-OpenSSH\r\n"
    proc.stdin.close()  # ssh is done: the tunnel ends
    assert proc.wait(20) == 0
    assert api.requests == [
        (
            "WS",
            PF.format(
                ns="ns2", resource="virtualmachineinstances", name="vm1", port=22, protocol="tcp"
            ),
            None,
        )
    ]
    assert api.protocols == ["plain.kubevirt.io"]


def test_stdio_reports_a_refused_port_and_exits_1(fake: tuple[FakeApi, str]) -> None:
    _, server = fake
    proc = _virtctl(
        "port-forward", "--stdio", "vm/vm1", "2222", "-s", server, "--insecure-skip-tls-verify"
    )
    # stdin stays open, as ssh keeps it: communicate() would close it at once, and a
    # tunnel whose user side ended first exits 0 before the server's refusal arrives.
    assert proc.stdin is not None
    assert proc.stderr is not None
    try:
        proc.wait(timeout=120)
    finally:
        proc.stdin.close()
    err = proc.stderr.read()
    assert proc.returncode == 1
    assert b"can't access vm/vm1: dialing tcp 127.0.0.1:2222: refused" in err


def test_stdio_takes_one_port_only(run: Run) -> None:
    result = run("port-forward", "--stdio", "vmi/vm1", "22", "80")
    assert result.code == 2
    assert "only one port" in result.err


async def test_a_local_listener_opens_one_stream_per_connection(
    fake: tuple[FakeApi, str], loopback_cert: LoopbackCert
) -> None:
    api, server = fake
    client = KubeClient(ApiClient(Configuration(host=server, ssl_ca_cert=str(loopback_cert.cert))))
    async with client:
        cluster = Cluster(client, "ns1", server)
        announced: asyncio.Queue[str] = asyncio.Queue()
        task = asyncio.ensure_future(
            serve_ports(
                cluster,
                Target("vm", "vm1"),
                [ForwardedPort(0, 22)],
                "127.0.0.1",
                announced.put_nowait,
            )
        )
        line = await asyncio.wait_for(announced.get(), 10)
        assert line.startswith("Forwarding from 127.0.0.1:")
        assert line.endswith(" -> 22")
        port = int(line.split(":")[1].split()[0])
        for text in (b"one", b"two"):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(text)
            assert await asyncio.wait_for(reader.readexactly(6 + len(text)), 10) == b"guest:" + text
            writer.close()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    path = PF.format(ns="ns1", resource="virtualmachines", name="vm1", port=22, protocol="tcp")
    assert [r[1] for r in api.requests] == [path, path]


def test_expose_creates_the_service(fake: tuple[FakeApi, str], run: Run) -> None:
    api, server = fake
    api.objects["/apis/kubevirt.io/v1/namespaces/ns1/virtualmachineinstances/vmi1"] = {
        "metadata": {"name": "vmi1", "namespace": "ns1", "labels": {"special": "key"}},
        "spec": {},
    }
    result = run(
        "expose", "vmi", "vmi1", "--name", "web", "--port", "80", "--target-port", "8080",
        "--type", "NodePort", "-n", "ns1", "-s", server, "--insecure-skip-tls-verify",
    )  # fmt: skip
    assert result.code == 0, result.err
    assert result.out == "Service web successfully exposed for vmi vmi1\n"
    method, path, body = api.requests[-1]
    assert (method, path) == ("POST", "/api/v1/namespaces/ns1/services")
    assert body["spec"] == {
        "ports": [{"protocol": "TCP", "port": 80, "targetPort": 8080}],
        "selector": {"special": "key"},
        "type": "NodePort",
    }


def test_expose_of_a_missing_vm_says_so(fake: tuple[FakeApi, str], run: Run) -> None:
    _, server = fake
    result = run(
        "expose", "vm", "ghost", "--name", "s", "--port", "22", "-s", server,
        "--insecure-skip-tls-verify",
    )  # fmt: skip
    assert result.code == 1
    assert "error fetching Virtual Machine: not found" in result.err
