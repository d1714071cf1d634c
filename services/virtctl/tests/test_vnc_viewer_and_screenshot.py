"""`virtctl vnc VMI` starts a viewer on the proxy; `vnc screenshot` writes the PNG it gets."""

from __future__ import annotations

import asyncio
import os
import ssl
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from aiohttp import web
from virtctl.cli import main
from virtctl.commands.vnc import viewer_command

if TYPE_CHECKING:
    from conftest import LoopbackCert

PNG = b"\x89PNG\r\n\x1a\nnot really"


class FakeVirtApi:
    """The vnc stream (an RFB greeting) and vnc/screenshot (a PNG), on real TLS."""

    def __init__(self) -> None:
        self.screenshot_queries: list[dict[str, str]] = []

    async def vnc(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(protocols=("binary.kubevirt.io",))
        await ws.prepare(request)
        await ws.send_bytes(b"RFB 003.008\n")
        async for _ in ws:
            pass
        return ws

    async def screenshot(self, request: web.Request) -> web.Response:
        self.screenshot_queries.append(dict(request.query))
        if request.match_info["name"] == "missing":
            return web.json_response(
                {"kind": "Status", "code": 404, "reason": "NotFound", "message": "not found"},
                status=404,
            )
        return web.Response(body=PNG, content_type="image/png")


@pytest.fixture
def fake(loopback_cert: LoopbackCert) -> Iterator[tuple[FakeVirtApi, str]]:
    api = FakeVirtApi()
    app = web.Application()
    base = "/apis/subresources.kubevirt.io/v1/namespaces/{ns}/virtualmachineinstances/{name}"
    app.router.add_get(base + "/vnc", api.vnc)
    app.router.add_get(base + "/vnc/screenshot", api.screenshot)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(str(loopback_cert.cert), str(loopback_cert.key))
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    holder: dict[str, Any] = {}

    async def start() -> None:
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context).start()
        holder["runner"], holder["port"] = runner, runner.addresses[0][1]
        ready.set()

    thread = threading.Thread(target=lambda: (loop.run_until_complete(start()), loop.run_forever()))
    thread.start()
    ready.wait(30)
    yield api, f"https://127.0.0.1:{holder['port']}"
    asyncio.run_coroutine_threadsafe(holder["runner"].cleanup(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)


def _fake_viewer(directory: Path, name: str, seen: Path) -> None:
    """A `name` on PATH that connects to the address it is given and records the greeting."""
    script = directory / name
    script.write_text(
        f"#!{sys.executable}\n"
        "import socket, sys\n"
        "address = sys.argv[1].removeprefix('vnc://')\n"
        "host, port = address.rsplit(':', 1)\n"
        "with socket.create_connection((host, int(port)), timeout=30) as s:\n"
        "    data = s.recv(12)\n"
        f"open({str(seen)!r}, 'w').write(sys.argv[1] + ' ' + data.decode())\n"
    )
    script.chmod(0o755)


def test_vnc_starts_remote_viewer_on_the_proxy_and_ends_with_it(
    fake: tuple[FakeVirtApi, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, server = fake
    seen = tmp_path / "seen"
    _fake_viewer(tmp_path, "remote-viewer", seen)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert main(["vnc", "vm1", "-s", server, "--insecure-skip-tls-verify"]) == 0
    address, greeting = seen.read_text().split(" ", 1)
    assert address.startswith("vnc://127.0.0.1:")
    assert greeting == "RFB 003.008\n"


def test_the_viewer_choice_follows_upstream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ValueError, match="could not find remote-viewer or vncviewer binary"):
        viewer_command(5900)
    _fake_viewer(tmp_path, "vncviewer", tmp_path / "unused")
    assert viewer_command(5900) == [str(tmp_path / "vncviewer"), "127.0.0.1:5900"]
    with pytest.raises(ValueError, match="could not find remote-viewer in"):
        viewer_command(5900, "remote-viewer")


def test_no_viewer_is_one_line_and_exit_1(
    fake: tuple[FakeVirtApi, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, server = fake
    monkeypatch.setenv("PATH", str(tmp_path))
    assert main(["vnc", "vm1", "-s", server, "--insecure-skip-tls-verify"]) == 1
    assert "could not find remote-viewer or vncviewer binary in $PATH" in capsys.readouterr().err


def test_screenshot_writes_the_png(fake: tuple[FakeVirtApi, str], tmp_path: Path) -> None:
    api, server = fake
    out = tmp_path / "screen.png"
    argv = ["vnc", "screenshot", "vm1", "-f", str(out), "-m", "-s", server]
    assert main([*argv, "--insecure-skip-tls-verify"]) == 0
    assert out.read_bytes() == PNG
    assert api.screenshot_queries == [{"moveCursor": "true"}]


def test_screenshot_of_a_missing_vmi_and_without_a_file(
    fake: tuple[FakeVirtApi, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, server = fake
    flags = ["-s", server, "--insecure-skip-tls-verify"]
    assert main(["vnc", "screenshot", "missing", "-f", str(tmp_path / "x.png"), *flags]) == 1
    assert "Can't access VMI missing: not found (404 NotFound)" in capsys.readouterr().err
    assert not (tmp_path / "x.png").exists()
    assert main(["vnc", "screenshot", "vm1", *flags]) == 2
