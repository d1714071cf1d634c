"""The internal interface to virt-handler for VMI subresources (pause, console, ...).

virt-api never touches a guest itself: it finds the virt-handler on the VMI's node and
relays the command over HTTPS with mutual TLS. See README.md for the URL layout.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import quote

import aiohttp
from kube_runtime import PODS, KubeClient

__all__ = [
    "AGENT_REPORTS",
    "COMMANDS",
    "HANDLER_PORT",
    "HandlerClient",
    "HandlerError",
    "HandlerLocator",
    "HttpHandlerClient",
    "NodeHandlerLocator",
    "PodHandlerLocator",
    "StaticHandlerLocator",
    "handler_path",
]

HANDLER_PORT = 8186
# The handler's streams: the console, VNC, and a guest port (`portforward/22/tcp`).
_STREAM = re.compile(r"^(console|vnc|portforward/[1-9][0-9]{0,4}/(tcp|udp))$")
# Commands virt-handler executes with PUT (body: the subresource's JSON options, if any).
COMMANDS = ("pause", "unpause", "softreboot", "reset", "freeze", "unfreeze")
# What virt-handler answers with GET from the guest agent's report.
AGENT_REPORTS = ("guestosinfo", "userlist", "filesystemlist")


class HandlerError(Exception):
    """virt-handler could not be reached or refused the command."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def handler_path(namespace: str, name: str, action: str) -> str:
    """The handler URL path for one VMI action: /v1/namespaces/{ns}/virtualmachineinstances/{name}/{action}."""
    return f"/v1/namespaces/{quote(namespace, safe='')}/virtualmachineinstances/{quote(name, safe='')}/{action}"


class HandlerClient(Protocol):
    """What virt-api needs from the handler running a VMI."""

    async def command(
        self, vmi: Mapping[str, Any], action: str, body: Mapping[str, Any] | None = None
    ) -> None:
        """Run one of COMMANDS against the VMI; raise HandlerError on failure."""
        ...

    async def agent_report(self, vmi: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
        """The guest agent's report: ``guestosinfo``, ``userlist`` or ``filesystemlist``."""
        ...

    async def open_stream(
        self, vmi: Mapping[str, Any], kind: str
    ) -> aiohttp.ClientWebSocketResponse:
        """A websocket to the VMI's `console`, `vnc` or `portforward/<port>/<tcp|udp>` bytes.

        The handler may end it with a close code other than 1000 and a reason (a port
        forward whose guest port refused)."""
        ...

    async def screenshot(self, vmi: Mapping[str, Any], move_cursor: bool) -> bytes:
        """A PNG of the VMI's screen (its VNC server), or HandlerError."""
        ...


class HandlerLocator(Protocol):
    """Find the base URL of the handler serving a VMI."""

    async def locate(self, vmi: Mapping[str, Any]) -> str:
        """`https://host:port` of the handler on the VMI's node; HandlerError if none."""
        ...


@dataclass(frozen=True, slots=True)
class StaticHandlerLocator:
    """One fixed handler for every VMI (single-node clusters and tests)."""

    url: str

    async def locate(self, vmi: Mapping[str, Any]) -> str:
        return self.url


@dataclass(frozen=True, slots=True)
class NodeHandlerLocator:
    """A fixed handler URL per node name (handlers run on the host, one port per node)."""

    urls: Mapping[str, str]

    async def locate(self, vmi: Mapping[str, Any]) -> str:
        status = vmi.get("status")
        node = status.get("nodeName") if isinstance(status, Mapping) else None
        if not isinstance(node, str) or not node:
            raise HandlerError(409, "the VMI is not scheduled on a node yet")
        url = self.urls.get(node)
        if url is None:
            raise HandlerError(503, f"no virt-handler is known for node {node}")
        return url


class PodHandlerLocator:
    """The virt-handler pod (label kubevirt.io=virt-handler) on the VMI's node."""

    def __init__(
        self, api: KubeClient, namespace: str = "kubevirt", port: int = HANDLER_PORT
    ) -> None:
        self._api = api
        self._namespace = namespace
        self._port = port

    async def locate(self, vmi: Mapping[str, Any]) -> str:
        status = vmi.get("status")
        node = status.get("nodeName") if isinstance(status, Mapping) else None
        if not isinstance(node, str) or not node:
            raise HandlerError(409, "the VMI is not scheduled on a node yet")
        pods = await self._api.list(
            PODS,
            self._namespace,
            label_selector="kubevirt.io=virt-handler",
            field_selector=f"spec.nodeName={node}",
        )
        for pod in pods.get("items") or [] if isinstance(pods, Mapping) else []:
            ip = (pod.get("status") or {}).get("podIP")
            if isinstance(ip, str) and ip:
                host = f"[{ip}]" if ":" in ip else ip
                return f"https://{host}:{self._port}"
        raise HandlerError(503, f"no virt-handler is running on node {node}")


def _coordinates(vmi: Mapping[str, Any]) -> tuple[str, str]:
    meta = vmi.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


class HttpHandlerClient:
    """HandlerClient over HTTPS with mutual TLS (virt-api's client cert, the handler's CA)."""

    def __init__(
        self, locator: HandlerLocator, ssl_context: ssl.SSLContext | None, *, timeout: float = 20.0
    ) -> None:
        self._locator = locator
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=ssl_context if ssl_context is not None else True),
            timeout=aiohttp.ClientTimeout(total=timeout),
        )

    async def close(self) -> None:
        """Release connections."""
        await self._session.close()

    async def _url(self, vmi: Mapping[str, Any], action: str) -> str:
        namespace, name = _coordinates(vmi)
        return await self._locator.locate(vmi) + handler_path(namespace, name, action)

    async def command(
        self, vmi: Mapping[str, Any], action: str, body: Mapping[str, Any] | None = None
    ) -> None:
        if action not in COMMANDS:
            raise HandlerError(400, f"unknown handler command {action!r}")
        url = await self._url(vmi, action)
        try:
            async with self._session.put(url, json=dict(body or {})) as response:
                if response.status >= 300:
                    raise HandlerError(response.status, (await response.text())[:500])
        except aiohttp.ClientError as error:
            raise HandlerError(503, f"virt-handler unreachable: {error}") from error

    async def agent_report(self, vmi: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
        if kind not in AGENT_REPORTS:
            raise HandlerError(400, f"unknown guest agent report {kind!r}")
        url = await self._url(vmi, kind)
        try:
            async with self._session.get(url) as response:
                if response.status >= 300:
                    raise HandlerError(response.status, (await response.text())[:500])
                info = await response.json()
        except (aiohttp.ClientError, ValueError) as error:
            raise HandlerError(503, f"virt-handler unreachable: {error}") from error
        if not isinstance(info, Mapping):
            raise HandlerError(502, f"virt-handler sent a {kind} that is not an object")
        return info

    async def screenshot(self, vmi: Mapping[str, Any], move_cursor: bool) -> bytes:
        url = await self._url(vmi, "vnc/screenshot")
        params = {"moveCursor": "true"} if move_cursor else {}
        try:
            async with self._session.get(url, params=params) as response:
                if response.status >= 300:
                    raise HandlerError(response.status, (await response.text())[:500])
                return await response.read()
        except aiohttp.ClientError as error:
            raise HandlerError(503, f"virt-handler unreachable: {error}") from error

    async def open_stream(
        self, vmi: Mapping[str, Any], kind: str
    ) -> aiohttp.ClientWebSocketResponse:
        if not _STREAM.match(kind):
            raise HandlerError(400, f"unknown stream {kind!r}")
        url = await self._url(vmi, kind)
        try:
            return await self._session.ws_connect(url)
        except aiohttp.ClientError as error:
            raise HandlerError(503, f"virt-handler unreachable: {error}") from error
