"""VirtualMachineExports from the client side: create, wait until Ready, download, delete.

The download goes to status.links.internal (this cluster has no export proxy, so no
external links). Its host, `virt-export-<name>.<ns>.svc`, is cluster DNS the client cannot
resolve, so the connection goes either to the exporter pod's IP (a host of the local
cluster routes pod IPs, not Service IPs) or, with `--port-forward`, through the API
server's pod port-forward to the pod's 8443. Either way TLS is checked against the
certificate in status.links.internal.cert for that host name, unless `--insecure`.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ssl
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import quote, urlsplit

import aiohttp
from kube_runtime import PODS, SECRETS, ApiError
from kubevirt_api import exports as ex
from kubevirt_api.resources import VIRTUAL_MACHINE_EXPORTS

from virtctl.commands.subresource import Cluster, SubresourceError

__all__ = [
    "PORT_FORWARD_PROTOCOL",
    "Download",
    "ExportSource",
    "choose_url",
    "create_export",
    "delete_export",
    "download",
    "export_body",
    "port_forward",
    "wait_ready",
]

#: The pod port-forward websocket's channel protocol (a byte of channel, then data).
PORT_FORWARD_PROTOCOL = "v4.channel.k8s.io"
_CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class ExportSource:
    """--pvc, --vm or --snapshot."""

    kind: str
    name: str

    def reference(self) -> dict[str, str]:
        groups = {"VirtualMachine": "kubevirt.io", "VirtualMachineSnapshot": "snapshot.kubevirt.io"}
        return {"apiGroup": groups.get(self.kind, ""), "kind": self.kind, "name": self.name}


def export_body(name: str, namespace: str, source: ExportSource, ttl: str | None) -> dict[str, Any]:
    """The VirtualMachineExport `create` posts."""
    spec: dict[str, Any] = {"source": source.reference()}
    if ttl:
        spec["ttlDuration"] = ttl
    return {
        "apiVersion": "export.kubevirt.io/v1",
        "kind": "VirtualMachineExport",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def _refused(action: str, error: ApiError) -> SubresourceError:
    return SubresourceError(f"{action}: {error.message or error.reason} ({error.status})")


async def create_export(cluster: Cluster, name: str, source: ExportSource, ttl: str | None) -> None:
    body = export_body(name, cluster.namespace, source, ttl)
    try:
        await cluster.client.create(VIRTUAL_MACHINE_EXPORTS, body)
    except ApiError as error:
        raise _refused(
            f"cannot create VirtualMachineExport {cluster.namespace}/{name}", error
        ) from None


async def delete_export(cluster: Cluster, name: str) -> bool:
    """Delete it; False when it was not there."""
    try:
        await cluster.client.delete(VIRTUAL_MACHINE_EXPORTS, name, cluster.namespace)
    except ApiError as error:
        if error.not_found:
            return False
        raise _refused(
            f"cannot delete VirtualMachineExport {cluster.namespace}/{name}", error
        ) from None
    return True


async def wait_ready(
    cluster: Cluster,
    name: str,
    patience: float,
    *,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    interval: float = 1.0,
) -> Mapping[str, Any]:
    """The export once its phase is Ready. SubresourceError when it is Skipped (nothing
    to download, with the Ready condition's reason), gone, or not Ready within `patience`
    seconds (counted in polls, so a fake `sleep` makes it testable)."""
    waited = 0.0
    while True:
        try:
            export: Mapping[str, Any] = await cluster.client.get(
                VIRTUAL_MACHINE_EXPORTS, name, cluster.namespace
            )
        except ApiError as error:
            raise _refused(f"VirtualMachineExport {cluster.namespace}/{name}", error) from None
        status = export.get("status") or {}
        phase = status.get("phase")
        if phase == "Ready":
            return export
        conditions = [c for c in status.get("conditions") or () if c.get("type") == "Ready"]
        ready: Mapping[str, Any] = conditions[0] if conditions else {}
        why = f"{ready.get('reason') or 'no reason yet'}: {ready.get('message') or ''}".rstrip(": ")
        if phase == "Skipped":
            raise SubresourceError(
                f"VirtualMachineExport {name} is Skipped ({why}): nothing to download"
            )
        if waited >= patience:
            raise SubresourceError(
                f"VirtualMachineExport {name} not Ready after {patience:g}s (phase {phase or 'unset'}, {why})"
            )
        await sleep(interval)
        waited += interval


def choose_url(export: Mapping[str, Any], volume: str | None, fmt: str) -> tuple[str, str]:
    """(volume name, URL) of `fmt` ("raw" or "gzip") in status.links.internal."""
    internal = ((export.get("status") or {}).get("links") or {}).get("internal") or {}
    volumes = list(internal.get("volumes") or ())
    names = [str(v.get("name")) for v in volumes]
    if not volumes:
        raise SubresourceError("the export lists no volumes in status.links.internal")
    if volume is None:
        if len(volumes) > 1:
            raise SubresourceError(
                f"--volume: the export has {len(volumes)} volumes; choose one of {', '.join(names)}"
            )
        chosen = volumes[0]
    else:
        matching = [v for v in volumes if v.get("name") == volume]
        if not matching:
            raise SubresourceError(
                f"--volume: {volume!r} is not exported; choose one of {', '.join(names)}"
            )
        chosen = matching[0]
    for entry in chosen.get("formats") or ():
        if entry.get("format") == fmt:
            return str(chosen.get("name")), str(entry["url"])
    offered = ", ".join(str(f.get("format")) for f in chosen.get("formats") or ())
    raise SubresourceError(
        f"--format: {fmt!r} is not offered for {chosen.get('name')} (offered: {offered})"
    )


async def _token(cluster: Cluster, export: Mapping[str, Any]) -> str:
    ref = (export.get("status") or {}).get("tokenSecretRef")
    if not ref:
        raise SubresourceError("the export has no status.tokenSecretRef yet")
    try:
        secret = await cluster.client.get(SECRETS, str(ref), cluster.namespace)
    except ApiError as error:
        raise _refused(f"cannot read the token Secret {ref}", error) from None
    encoded = (secret.get("data") or {}).get(ex.TOKEN_KEY)
    if not encoded:
        raise SubresourceError(f"Secret {ref} has no key {ex.TOKEN_KEY!r}")
    return base64.b64decode(encoded).decode().strip()


def _tls(export: Mapping[str, Any], insecure: bool) -> ssl.SSLContext:
    if insecure:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    cert = (((export.get("status") or {}).get("links") or {}).get("internal") or {}).get("cert")
    if not cert:
        raise SubresourceError(
            "status.links.internal.cert is empty: cannot verify the exporter (use --insecure to skip)"
        )
    # Only the export's own certificate is trusted for this connection.
    return ssl.create_default_context(cadata=str(cert))


@dataclass(frozen=True, slots=True)
class Download:
    """What `download` fetched."""

    volume: str
    url: str
    bytes: int


def _frames(data: bytes, channel: int = 0) -> bytes:
    return bytes([channel]) + data


async def _pump_port_forward(
    ws: aiohttp.ClientWebSocketResponse,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
) -> None:
    """Relay one local connection over a pod port-forward websocket (channel 0 data,
    channel 1 errors; each channel's first frame carries the port, 2 bytes, dropped)."""
    seen: set[int] = set()

    async def upstream() -> None:
        while data := await reader.read(65536):
            await ws.send_bytes(_frames(data))

    async def downstream() -> None:
        async for message in ws:
            if message.type != aiohttp.WSMsgType.BINARY or not message.data:
                continue
            channel, payload = message.data[0], message.data[1:]
            if channel not in seen:
                seen.add(channel)
                payload = payload[2:]
            if channel == 0 and payload:
                writer.write(payload)
                await writer.drain()
            elif channel == 1 and payload:
                raise SubresourceError(f"port-forward: {payload.decode(errors='replace')}")

    tasks = [asyncio.ensure_future(upstream()), asyncio.ensure_future(downstream())]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            task.result()
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await ws.close()
        writer.close()


@contextlib.asynccontextmanager
async def port_forward(
    cluster: Cluster, pod: str, port: int, local_port: int = 0
) -> AsyncIterator[int]:
    """A listener on 127.0.0.1 whose connections reach `pod`:`port` through the API
    server; yields the local port."""
    path = (
        f"/api/v1/namespaces/{quote(cluster.namespace, safe='')}/pods/"
        f"{quote(pod, safe='')}/portforward?ports={port}"
    )

    async def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            ws = await cluster.websocket(path, (PORT_FORWARD_PROTOCOL,))
            await _pump_port_forward(ws, reader, writer)
        except SubresourceError as error:
            # The download sees its connection end and says so; this says why.
            print(f"virtctl: port-forward to {pod}: {error}", file=sys.stderr)
            writer.close()

    server = await asyncio.start_server(on_connection, "127.0.0.1", local_port)
    try:
        yield int(server.sockets[0].getsockname()[1])
    finally:
        server.close()
        await server.wait_closed()


async def _pod_address(cluster: Cluster, export: Mapping[str, Any]) -> tuple[str, int]:
    """The exporter pod's IP and port: what a host of the local cluster can route (its
    Service's ClusterIP is NATed only for traffic from pods, and blackholed on the host)."""
    pod_name = ex.exporter_name(str((export.get("metadata") or {}).get("name")))
    try:
        pod = await cluster.client.get(PODS, pod_name, cluster.namespace)
    except ApiError as error:
        raise _refused(f"cannot find the exporter pod {pod_name}", error) from None
    ip = (pod.get("status") or {}).get("podIP")
    if not ip:
        raise SubresourceError(f"the exporter pod {pod_name} has no IP yet (try --port-forward)")
    ports = [
        p.get("containerPort")
        for c in (pod.get("spec") or {}).get("containers") or ()
        for p in c.get("ports") or ()
        if isinstance(p.get("containerPort"), int)
    ]
    return str(ip), ports[0] if ports else ex.SERVER_PORT


async def _fetch(
    url: str,
    address: tuple[str, int],
    token: str,
    context: ssl.SSLContext,
    out: BinaryIO,
) -> int:
    parts = urlsplit(url)
    host = parts.hostname or ""
    target = f"https://{address[0]}:{address[1]}{parts.path}"
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=30, sock_read=300)
    written = 0
    try:
        async with (
            aiohttp.ClientSession(timeout=timeout, auto_decompress=False) as session,
            session.get(
                target,
                headers={ex.TOKEN_HEADER: token, "Host": host},
                ssl=context,
                server_hostname=host,
            ) as response,
        ):
            if response.status != 200:
                body = (await response.text())[:200].strip()
                raise SubresourceError(f"GET {url}: {response.status} {response.reason}: {body}")
            async for chunk in response.content.iter_chunked(_CHUNK):
                await asyncio.to_thread(out.write, chunk)
                written += len(chunk)
    except (aiohttp.ClientError, TimeoutError) as error:
        via = f"{address[0]}:{address[1]}"
        reason = str(error) or type(error).__name__
        raise SubresourceError(f"GET {url} (via {via}): {reason}") from None
    return written


async def download(
    cluster: Cluster,
    export: Mapping[str, Any],
    output: Path,
    *,
    volume: str | None,
    fmt: str,
    insecure: bool,
    use_port_forward: bool,
    local_port: int = 0,
) -> Download:
    """Fetch one volume of a Ready export into `output` (written as it arrives)."""
    name, url = choose_url(export, volume, fmt)
    token = await _token(cluster, export)
    context = _tls(export, insecure)
    with output.open("wb") as out:
        if use_port_forward:
            pod = ex.exporter_name(str((export.get("metadata") or {}).get("name")))
            try:
                await cluster.client.get(PODS, pod, cluster.namespace)
            except ApiError as error:
                raise _refused(f"cannot find the exporter pod {pod}", error) from None
            async with port_forward(cluster, pod, ex.SERVER_PORT, local_port) as port:
                written = await _fetch(url, ("127.0.0.1", port), token, context, out)
        else:
            address = await _pod_address(cluster, export)
            written = await _fetch(url, address, token, context, out)
    return Download(name, url, written)
