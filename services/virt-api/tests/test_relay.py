"""VMI subresources reach virt-handler over mutual TLS (against an in-process handler double).

portforward too: upstream's paths, its SubjectAccessReview, the handler's close reason."""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from service_kit import TLSFiles, server_context
from virt_api import (
    FrontProxyConfig,
    HttpHandlerClient,
    StaticHandlerLocator,
    SubresourceContext,
    build_app,
)
from virt_api.relay import HandlerError
from virt_api.server import serving_tls

VMI_PATH = "/apis/kubevirt.io/v1/namespaces/ns1/virtualmachineinstances/vmi1"
VMI: dict[str, Any] = {
    "metadata": {"name": "vmi1", "namespace": "ns1"},
    "spec": {},
    "status": {
        "phase": "Running",
        "nodeName": "node1",
        "conditions": [{"type": "AgentConnected", "status": "True"}],
    },
}


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class HandlerDouble:
    """What virt-handler will serve: commands by PUT, guest info by GET, console by websocket."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Any, str | None]] = []
        self.consoles_opened = 0
        self.consoles_closed = 0
        self.app = web.Application()
        base = "/v1/namespaces/{ns}/virtualmachineinstances/{name}"
        self.app.router.add_put(base + "/{action}", self.command)
        self.app.router.add_get(base + "/guestosinfo", self.info)
        self.app.router.add_get(base + "/userlist", self.users)
        self.app.router.add_get(base + "/filesystemlist", self.filesystems)
        self.app.router.add_get(base + "/console", self.console)
        self.app.router.add_get(base + "/vnc/screenshot", self.screenshot)
        self.app.router.add_get(base + "/portforward/{port}/{protocol}", self.portforward)
        self.forwards: list[str] = []

    def _peer(self, request: web.Request) -> str | None:
        cert = request.transport.get_extra_info("peercert") if request.transport else None
        return dict(x[0] for x in cert["subject"])["commonName"] if cert else None

    async def command(self, request: web.Request) -> web.Response:
        self.calls.append(("PUT", request.path, await request.json(), self._peer(request)))
        return web.Response(status=200)

    async def info(self, request: web.Request) -> web.Response:
        return web.json_response({"guestAgentVersion": "5.2", "os": {"name": "Fedora"}})

    async def screenshot(self, request: web.Request) -> web.Response:
        self.calls.append(("GET", request.path_qs, None, self._peer(request)))
        return web.Response(body=b"\x89PNG fake", content_type="image/png")

    async def users(self, request: web.Request) -> web.Response:
        return web.json_response({"metadata": {}, "items": [{"userName": "root"}]})

    async def filesystems(self, request: web.Request) -> web.Response:
        disk = {"diskName": "vda1", "mountPoint": "/boot", "fileSystemType": "vfat"}
        return web.json_response({"metadata": {}, "items": [disk]})

    async def console(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self.consoles_opened += 1
        async for message in ws:
            await ws.send_bytes(b"guest:" + message.data)
        self.consoles_closed += 1
        return ws

    async def portforward(self, request: web.Request) -> web.WebSocketResponse:
        """Port 22 echoes with a prefix; any other port is refused, as a guest would."""
        self.forwards.append(request.path)
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        if request.match_info["port"] != "22":
            await ws.close(code=1011, message=b"dialing tcp 127.0.0.1:23 in the pod: refused")
            return ws
        async for message in ws:
            await ws.send_bytes(b"sshd:" + message.data)
        return ws


class Rig:
    def __init__(self, authority: Callable[[str], Any]) -> None:
        self.serving = authority("serving")
        self.handler_ca = authority("handler-clients")
        self.proxy_ca = authority("front-proxy")
        self.double = HandlerDouble()
        self.handler_port = _port()
        self.api_port = _port()


@pytest.fixture
async def rig(
    authority: Callable[[str], Any], fake_api: Any, admission: Callable[..., Any]
) -> AsyncIterator[Rig]:
    rig = Rig(authority)
    handler_cert = rig.serving.issue("handler", "virt-handler", server=True)
    # The handler demands virt-api's client certificate.
    handler_tls = server_context(
        TLSFiles(handler_cert.cert, handler_cert.key),
        require_client_cert=True,
        client_ca_pem=rig.handler_ca.pem,
    )
    runner = web.AppRunner(rig.double.app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", rig.handler_port, ssl_context=handler_tls).start()

    client_cert = rig.handler_ca.issue("virt-api-client", "virt-api")
    client_tls = ssl.create_default_context(cafile=str(rig.serving.path))
    client_tls.load_cert_chain(str(client_cert.cert), str(client_cert.key))
    rig.client = HttpHandlerClient(
        StaticHandlerLocator(f"https://localhost:{rig.handler_port}"), client_tls
    )  # type: ignore[attr-defined]

    fake_api.objects[VMI_PATH] = VMI
    front = FrontProxyConfig(
        ca_pem=rig.proxy_ca.pem, allowed_names=frozenset({"front-proxy-client"})
    )
    app = build_app(admission(), SubresourceContext(fake_api.client, front, rig.client))  # type: ignore[attr-defined]
    api_cert = rig.serving.issue("api", "virt-api", server=True)
    api_runner = web.AppRunner(app)
    await api_runner.setup()
    await web.TCPSite(
        api_runner,
        "127.0.0.1",
        rig.api_port,
        ssl_context=serving_tls(str(api_cert.cert), str(api_cert.key), rig.proxy_ca.pem).context,
    ).start()
    proxy = rig.proxy_ca.issue("proxy", "front-proxy-client")
    proxy_tls = ssl.create_default_context(cafile=str(rig.serving.path))
    proxy_tls.load_cert_chain(str(proxy.cert), str(proxy.key))
    rig.session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(ssl=proxy_tls), headers={"X-Remote-User": "alice"}
    )  # type: ignore[attr-defined]
    yield rig
    await rig.session.close()  # type: ignore[attr-defined]
    await rig.client.close()  # type: ignore[attr-defined]
    await api_runner.cleanup()
    await runner.cleanup()


def url(rig: Rig, action: str) -> str:
    return f"https://localhost:{rig.api_port}/apis/subresources.kubevirt.io/v1/namespaces/ns1/virtualmachineinstances/vmi1/{action}"


async def test_pause_is_relayed_with_mutual_tls(rig: Any) -> None:
    async with rig.session.put(url(rig, "pause"), json={}) as response:
        assert response.status == 202
    assert rig.double.calls == [
        ("PUT", "/v1/namespaces/ns1/virtualmachineinstances/vmi1/pause", {}, "virt-api")
    ]


async def test_pause_dry_run_stops_before_the_handler(rig: Any) -> None:
    async with rig.session.put(url(rig, "pause"), json={"dryRun": ["All"]}) as response:
        assert response.status == 202
    assert rig.double.calls == []


async def test_freeze_options_are_forwarded(rig: Any) -> None:
    async with rig.session.put(url(rig, "freeze"), json={"unfreezeTimeout": "5m"}) as response:
        assert response.status == 202
    assert rig.double.calls[0][2] == {"unfreezeTimeout": "5m"}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (None, "Request with no body: unfreeze timeout is required"),
        ({}, "Unfreeze timeout must be provided"),
        ({"unfreezeTimeout": "-1s"}, "Unfreeze timeout must be positive"),
        ({"unfreezeTimeout": "soon"}, "Can not unmarshal Request body to struct"),
    ],
)
async def test_freeze_needs_a_valid_unfreeze_timeout(rig: Any, body: Any, message: str) -> None:
    async with rig.session.put(url(rig, "freeze"), json=body) as response:
        assert response.status == 400
        assert message in (await response.json())["message"]
    assert rig.double.calls == []


async def test_unfreeze_is_relayed(rig: Any) -> None:
    async with rig.session.put(url(rig, "unfreeze")) as response:
        assert response.status == 202
    assert rig.double.calls[0][1].endswith("/vmi1/unfreeze")


async def test_userlist_and_filesystemlist_come_from_the_handler(rig: Any) -> None:
    async with rig.session.get(url(rig, "userlist")) as response:
        assert response.status == 200
        assert (await response.json())["items"] == [{"userName": "root"}]
    async with rig.session.get(url(rig, "filesystemlist")) as response:
        assert response.status == 200
        assert (await response.json())["items"][0]["mountPoint"] == "/boot"


@pytest.mark.parametrize("action", ["guestosinfo", "userlist", "filesystemlist", "freeze"])
async def test_the_agent_subresources_need_the_agent_and_a_running_vmi(
    rig: Any, fake_api: Any, action: str
) -> None:
    method = rig.session.put if action == "freeze" else rig.session.get
    options = {"json": {"unfreezeTimeout": "5m"}} if action == "freeze" else {}
    no_agent = {**VMI, "status": {**VMI["status"], "conditions": []}}
    fake_api.objects[VMI_PATH] = no_agent
    async with method(url(rig, action), **options) as response:
        assert response.status == 409
        assert (await response.json())["message"] == "VMI does not have guest agent connected"
    fake_api.objects[VMI_PATH] = {**VMI, "status": {"phase": "Scheduled"}}
    async with method(url(rig, action), **options) as response:
        assert response.status == 409
        assert (await response.json())["message"] == "VMI is not running"
    assert rig.double.calls == []


async def test_unpause_of_running_unpaused_vmi_conflicts(rig: Any) -> None:
    async with rig.session.put(url(rig, "unpause")) as response:
        assert response.status == 409
        assert "not paused" in (await response.json())["message"]
    assert rig.double.calls == []


async def test_guestosinfo_comes_from_the_handler(rig: Any) -> None:
    async with rig.session.get(url(rig, "guestosinfo")) as response:
        assert response.status == 200
        assert (await response.json())["os"] == {"name": "Fedora"}


async def test_screenshot_is_the_handlers_png(rig: Any) -> None:
    async with rig.session.get(url(rig, "vnc/screenshot?moveCursor=true")) as response:
        assert response.status == 200
        assert response.content_type == "image/png"
        assert await response.read() == b"\x89PNG fake"
    assert rig.double.calls == [
        (
            "GET",
            "/v1/namespaces/ns1/virtualmachineinstances/vmi1/vnc/screenshot?moveCursor=true",
            None,
            "virt-api",
        )
    ]
    async with rig.session.get(url(rig, "vnc/screenshot?moveCursor=maybe")) as response:
        assert response.status == 400


async def test_console_stream_is_joined_both_ways(rig: Any) -> None:
    async with rig.session.ws_connect(url(rig, "console")) as ws:
        await ws.send_bytes(b"ls\n")
        message = await ws.receive(timeout=5)
        assert message.data == b"guest:ls\n"


async def test_console_without_websocket_upgrade_is_400_and_closes_the_handler_stream(
    rig: Any,
) -> None:
    async with rig.session.get(url(rig, "console")) as response:
        assert response.status == 400
    deadline = time.monotonic() + 10
    while (rig.double.consoles_opened, rig.double.consoles_closed) != (1, 1):
        assert time.monotonic() < deadline, "the handler's console stream is still open"
        await asyncio.sleep(0.05)


async def test_unreachable_handler_is_a_clear_error(authority: Callable[[str], Any]) -> None:
    client = HttpHandlerClient(StaticHandlerLocator(f"https://127.0.0.1:{_port()}"), None)
    try:
        with pytest.raises(HandlerError) as caught:
            await client.command(VMI, "pause")
        assert caught.value.status == 503
    finally:
        await client.close()


async def test_node_locator_picks_the_vmis_node() -> None:
    from virt_api.relay import NodeHandlerLocator

    locator = NodeHandlerLocator({"node1": "https://10.0.0.1:1", "node2": "https://10.0.0.1:2"})
    assert await locator.locate(VMI) == "https://10.0.0.1:1"
    with pytest.raises(HandlerError) as caught:
        await locator.locate({**VMI, "status": {"nodeName": "node9"}})
    assert caught.value.status == 503
    with pytest.raises(HandlerError):
        await locator.locate({**VMI, "status": {}})


PF = "/v1/namespaces/ns1/virtualmachineinstances/vmi1/portforward"


@pytest.mark.parametrize("tail", ["portforward/22", "portforward/22/tcp"])
async def test_bytes_flow_both_ways_in_plain_kubevirt_io(rig: Any, tail: str) -> None:
    # Upstream's virtctl asks for the plain.kubevirt.io subprotocol.
    async with rig.session.ws_connect(url(rig, tail), protocols=("plain.kubevirt.io",)) as ws:
        assert ws.protocol == "plain.kubevirt.io"
        await ws.send_bytes(b"SSH-2.0-test\r\n")
        message = await ws.receive(timeout=5)
        assert message.data == b"sshd:SSH-2.0-test\r\n"
    assert rig.double.forwards == [f"{PF}/22/tcp"]


async def test_a_refused_guest_port_closes_with_the_handlers_reason(rig: Any) -> None:
    async with rig.session.ws_connect(url(rig, "portforward/23")) as ws:
        message = await ws.receive(timeout=5)
        assert message.type is aiohttp.WSMsgType.CLOSE
        assert message.data == 1011
        assert "refused" in message.extra


async def test_the_sar_asks_for_get_on_the_portforward_subresource(rig: Any, fake_api: Any) -> None:
    fake_api.allow = lambda spec: False
    async with rig.session.get(url(rig, "portforward/22")) as response:
        assert response.status == 403
        assert (
            'cannot get resource "virtualmachineinstances/portforward"'
            in (await response.json())["message"]
        )
    review = next(b for m, p, b, _ in fake_api.calls if p.endswith("/subjectaccessreviews"))
    assert review["spec"]["resourceAttributes"] == {
        "namespace": "ns1",
        "verb": "get",
        "group": "subresources.kubevirt.io",
        "version": "v1",
        "resource": "virtualmachineinstances",
        "subresource": "portforward",
        "name": "vmi1",
    }
    assert rig.double.forwards == []


@pytest.mark.parametrize(
    ("tail", "why"),
    [
        ("portforward/0", "1-65535"),
        ("portforward/65536", "1-65535"),
        ("portforward/ssh", "1-65535"),
        ("portforward/22/sctp", "tcp or udp"),
    ],
)
async def test_bad_ports_and_protocols_are_400(rig: Any, tail: str, why: str) -> None:
    async with rig.session.get(url(rig, tail)) as response:
        assert response.status == 400
        assert why in (await response.json())["message"]
    assert rig.double.forwards == []


async def test_a_paused_or_stopped_vmi_is_a_conflict(rig: Any, fake_api: Any) -> None:
    fake_api.objects[VMI_PATH] = {
        **VMI,
        "status": {**VMI["status"], "conditions": [{"type": "Paused", "status": "True"}]},
    }
    async with rig.session.get(url(rig, "portforward/22")) as response:
        assert response.status == 409
        assert "paused" in (await response.json())["message"]
    fake_api.objects[VMI_PATH] = {**VMI, "status": {"phase": "Scheduled"}}
    async with rig.session.get(url(rig, "portforward/22")) as response:
        assert response.status == 409
        assert "not running" in (await response.json())["message"]


async def test_a_vm_forwards_to_its_vmi_and_is_authorized_as_a_vm(rig: Any, fake_api: Any) -> None:
    vm_url = url(rig, "portforward/22").replace("virtualmachineinstances", "virtualmachines")
    async with rig.session.ws_connect(vm_url) as ws:
        await ws.send_bytes(b"x")
        assert (await ws.receive(timeout=5)).data == b"sshd:x"
    review = next(b for m, p, b, _ in fake_api.calls if p.endswith("/subjectaccessreviews"))
    assert review["spec"]["resourceAttributes"]["resource"] == "virtualmachines"
    assert review["spec"]["resourceAttributes"]["subresource"] == "portforward"
    stopped = vm_url.replace("vmi1", "ghost")
    async with rig.session.get(stopped) as response:
        assert response.status == 409
        assert "VirtualMachine ghost is not running" in (await response.json())["message"]


async def test_discovery_and_openapi_list_portforward(rig: Any) -> None:
    base = f"https://localhost:{rig.api_port}"
    async with rig.session.get(f"{base}/apis/subresources.kubevirt.io/v1") as response:
        resources = {r["name"]: r["verbs"] for r in (await response.json())["resources"]}
    assert resources["virtualmachineinstances/portforward"] == ["get"]
    assert resources["virtualmachines/portforward"] == ["get"]
    async with rig.session.get(f"{base}/openapi/v2") as response:
        paths = (await response.json())["paths"]
    prefix = (
        "/apis/subresources.kubevirt.io/v1/namespaces/{namespace}/virtualmachineinstances/{name}"
    )
    assert f"{prefix}/portforward/{{port}}" in paths
    for action, answer in (
        ("guestosinfo", "v1.VirtualMachineInstanceGuestAgentInfo"),
        ("userlist", "v1.VirtualMachineInstanceGuestOSUserList"),
        ("filesystemlist", "v1.VirtualMachineInstanceFileSystemList"),
    ):
        assert resources[f"virtualmachineinstances/{action}"] == ["get"]
        schema = paths[f"{prefix}/{action}"]["get"]["responses"]["200"]["schema"]
        assert schema == {"$ref": f"#/definitions/{answer}"}
    assert resources["virtualmachineinstances/freeze"] == ["update"]
    assert f"{prefix}/portforward/{{port}}/{{protocol}}" in paths
