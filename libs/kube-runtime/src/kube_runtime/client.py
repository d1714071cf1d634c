"""The client factory and a generic REST client for any group/version/resource.

Every call goes through kubernetes_asyncio's ApiClient (so kubeconfig and in-cluster auth,
client certificates and exec plugins work), but with our own response handling: status is
always checked, every call has a timeout, and a token bucket enforces QPS/burst.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit

import aiohttp
from kubernetes_asyncio.client import ApiClient, Configuration

from .clock import Clock, SystemClock
from .errors import ApiError
from .kubeconfig import ConfigOverrides, LoadedConfig, load_kubeconfig
from .metrics import InMemoryMetrics, MetricsRegistry, RestClientMetrics
from .patching import APPLY_PATCH, JSON_PATCH, MERGE_PATCH, JsonPatchOp
from .ratelimit import TokenBucket
from .resources import Resource

__all__ = ["ClientSettings", "KubeClient", "connect", "get_or_none", "load_configuration"]


@dataclass(frozen=True, slots=True)
class ClientSettings:
    """Client-side limits. Every request has a deadline; watches a read timeout."""

    qps: float = 20.0
    burst: int = 30
    connect_timeout: float = 5.0
    # None: non-streaming calls have no deadline (kubectl's --request-timeout=0).
    request_timeout: float | None = 30.0
    user_agent: str = "kubevirt-py"
    field_manager: str = "kubevirt-py"
    # Each running watch holds one connection for its lifetime; kubernetes_asyncio's
    # default pool (5 x CPUs) would let a dozen informers starve every other request.
    max_connections: int = 100
    # Retries when the server answers 429 or 5xx with a Retry-After header.
    max_retries: int = 5

    def __post_init__(self) -> None:
        if self.qps <= 0 or self.burst < 1:
            raise ValueError("qps must be > 0 and burst >= 1")
        if self.connect_timeout <= 0 or (
            self.request_timeout is not None and self.request_timeout <= 0
        ):
            raise ValueError("timeouts must be > 0")
        if self.max_connections < 2:
            raise ValueError("max_connections must be >= 2")


async def load_configuration(
    kubeconfig: str | os.PathLike[str] | None = None,
    context: str | None = None,
    *,
    token_file: str | os.PathLike[str] | None = None,
    clock: Clock | None = None,
) -> Configuration:
    """kubeconfig (argument, else the merged $KUBECONFIG list, else ~/.kube/config) if
    present, else in-cluster; see `kube_runtime.kubeconfig` for kubectl's rules.

    With `token_file`, the bearer token in that file is the only credential sent, re-read
    as it rotates (see `ConfigOverrides.token_file`).
    """
    overrides = ConfigOverrides(kubeconfig=kubeconfig, context=context, token_file=token_file)
    loaded = await load_kubeconfig(overrides, clock=clock)
    return loaded.configuration


async def connect(
    kubeconfig: str | os.PathLike[str] | None = None,
    *,
    context: str | None = None,
    token_file: str | os.PathLike[str] | None = None,
    settings: ClientSettings | None = None,
    metrics: MetricsRegistry | None = None,
    clock: Clock | None = None,
) -> KubeClient:
    """Build a KubeClient from a kubeconfig or the in-cluster service account.

    `token_file`: authenticate with the (rotating) bearer token in this file instead of
    the kubeconfig's user; see `ConfigOverrides.token_file`.
    """
    overrides = ConfigOverrides(kubeconfig=kubeconfig, context=context, token_file=token_file)
    loaded = await load_kubeconfig(overrides, clock=clock)
    return KubeClient.from_config(loaded, settings=settings, metrics=metrics, clock=clock)


class KubeClient:
    """Generic REST calls by Resource; owns its ApiClient (close it, or use `async with`)."""

    def __init__(
        self,
        api_client: ApiClient,
        *,
        settings: ClientSettings | None = None,
        metrics: MetricsRegistry | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.api_client = api_client
        self.settings = settings or ClientSettings()
        self.metrics = RestClientMetrics(metrics or InMemoryMetrics())
        self.clock = clock or SystemClock()
        self._bucket = TokenBucket(self.settings.qps, self.settings.burst, self.clock)
        self._host = str(urlsplit(str(api_client.configuration.host)).netloc)
        api_client.user_agent = self.settings.user_agent

    @classmethod
    def from_config(
        cls,
        loaded: LoadedConfig,
        *,
        settings: ClientSettings | None = None,
        metrics: MetricsRegistry | None = None,
        clock: Clock | None = None,
    ) -> KubeClient:
        """A client for a loaded kubeconfig (with its impersonation, if any)."""
        settings = settings or ClientSettings()
        api_client = loaded.api_client(max_connections=settings.max_connections)
        return cls(api_client, settings=settings, metrics=metrics, clock=clock)

    async def __aenter__(self) -> KubeClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self.api_client.close()

    # -- transport ------------------------------------------------------------------------

    async def _send(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]] = (),
        body: Any = None,
        content_type: str = "application/json",
        client_timeout: aiohttp.ClientTimeout,
        verb: str,
        resource: str,
    ) -> aiohttp.ClientResponse:
        waited = await self._bucket.acquire()
        self.metrics.rate_limiter.observe({"verb": verb, "url": path}, waited)
        headers = {"Accept": "application/json", "Content-Type": content_type}
        labels = {"method": method, "host": self._host, "resource": resource, "verb": verb}
        start = self.clock.monotonic()
        try:
            response: aiohttp.ClientResponse = await self.api_client.call_api(
                path,
                method,
                query_params=list(query),
                header_params=headers,
                body=body,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _request_timeout=client_timeout,
            )
        except Exception:
            self.metrics.requests.inc({**labels, "code": "<error>"})
            raise
        self.metrics.requests.inc({**labels, "code": str(response.status)})
        self.metrics.latency.observe({"verb": verb, "url": path}, self.clock.monotonic() - start)
        return response

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]] = (),
        body: Any = None,
        content_type: str = "application/json",
        request_timeout: float | None = None,
        verb: str = "",
        resource: str = "",
    ) -> Any:
        """One non-streaming call; returns the decoded JSON body or raises ApiError."""
        raw = await self.request_bytes(
            method,
            path,
            query=query,
            body=body,
            content_type=content_type,
            request_timeout=request_timeout,
            verb=verb,
            resource=resource,
        )
        return _decode_json(raw)

    async def request_bytes(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]] = (),
        body: Any = None,
        content_type: str = "application/json",
        request_timeout: float | None = None,
        verb: str = "",
        resource: str = "",
    ) -> bytes:
        """One non-streaming call; returns the body as sent (e.g. a PNG) or raises ApiError."""
        total = request_timeout if request_timeout is not None else self.settings.request_timeout
        connect = self.settings.connect_timeout
        client_timeout = aiohttp.ClientTimeout(
            total=total, sock_connect=connect if total is None else min(total, connect)
        )
        for attempt in range(self.settings.max_retries + 1):
            response = await self._send(
                method,
                path,
                query=query,
                body=body,
                content_type=content_type,
                client_timeout=client_timeout,
                verb=verb or method.lower(),
                resource=resource,
            )
            async with response:
                raw = await response.read()
            if 200 <= response.status <= 299:
                return raw
            wait = _retry_after(response)
            # The server asked us to come back (429 from priority & fairness, or 5xx
            # with Retry-After): the request was not executed, so any verb may retry.
            if wait is None or attempt == self.settings.max_retries:
                break
            await self.clock.sleep(min(wait, 10.0))
        decoded = _decode_json(raw)
        raise ApiError.from_status(response.status, decoded if isinstance(decoded, dict) else None)

    @contextlib.asynccontextmanager
    async def stream(
        self,
        path: str,
        *,
        query: Sequence[tuple[str, str]] = (),
        read_timeout: float,
        total_timeout: float | None,
        resource: str = "",
    ) -> AsyncIterator[AsyncIterator[dict[str, Any]]]:
        """A watch stream: yields decoded JSON lines; the HTTP status is checked first.

        `read_timeout` bounds the silence between two reads, so a half-open or stalled
        connection raises TimeoutError instead of hanging.
        """
        client_timeout = aiohttp.ClientTimeout(
            total=total_timeout, sock_connect=self.settings.connect_timeout, sock_read=read_timeout
        )
        response = await self._send(
            "GET", path, query=query, client_timeout=client_timeout, verb="watch", resource=resource
        )
        async with response:
            if response.status != 200:
                decoded = _decode_json(await response.read())
                raise ApiError.from_status(
                    response.status, decoded if isinstance(decoded, dict) else None
                )
            yield _json_lines(response)

    async def websocket(
        self, path: str, *, protocols: Sequence[str] = ()
    ) -> aiohttp.ClientWebSocketResponse:
        """Open a websocket to `path` (a streaming subresource such as a VMI's console)
        with this client's TLS, credentials and default headers; the caller closes it.

        The handshake is bounded by the connect timeout; the stream itself by nothing.
        Raises aiohttp.WSServerHandshakeError when the server refuses the upgrade.
        """
        headers: dict[str, str] = dict(self.api_client.default_headers)
        await self.api_client.update_params_for_auth(headers, [], ["BearerToken"])
        rest = self.api_client.rest_client
        host = str(self.api_client.configuration.host)
        scheme, _, rest_of_url = host.partition("://")
        url = f"{'wss' if scheme == 'https' else 'ws'}://{rest_of_url}{path}"
        async with asyncio.timeout(self.settings.connect_timeout):
            return await rest.pool_manager.ws_connect(
                url,
                headers=headers,
                protocols=tuple(protocols),
                proxy=rest.proxy,
                server_hostname=rest.server_hostname,
                heartbeat=None,
                max_msg_size=0,
            )

    # -- verbs by resource ----------------------------------------------------------------

    async def get(self, resource: Resource, name: str, namespace: str | None = None) -> Any:
        return await self.request(
            "GET", resource.path(namespace, name), verb="get", resource=resource.plural
        )

    async def list(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
        resource_version: str | None = None,
        request_timeout: float | None = None,
    ) -> Any:
        """One page of a list (a dict with items and metadata.continue)."""
        query = _selectors(label_selector, field_selector)
        if limit:
            query.append(("limit", str(limit)))
        if continue_token:
            query.append(("continue", continue_token))
        if resource_version is not None:
            query.append(("resourceVersion", resource_version))
        return await self.request(
            "GET",
            resource.path(namespace),
            query=query,
            verb="list",
            resource=resource.plural,
            request_timeout=request_timeout,
        )

    async def create(
        self,
        resource: Resource,
        body: Mapping[str, Any],
        namespace: str | None = None,
        *,
        dry_run: bool = False,
    ) -> Any:
        """POST `body`; with `dry_run` the server admits it but stores nothing."""
        ns = namespace if namespace is not None else _namespace_of(resource, body)
        return await self.request(
            "POST",
            resource.path(ns),
            query=_dry_run(dry_run),
            body=dict(body),
            verb="create",
            resource=resource.plural,
        )

    async def delete(
        self,
        resource: Resource,
        name: str,
        namespace: str | None = None,
        *,
        uid: str | None = None,
        resource_version: str | None = None,
        propagation: str | None = None,
        grace_period_seconds: int | None = None,
        dry_run: bool = False,
    ) -> Any:
        """Delete, optionally guarded by uid/resourceVersion preconditions."""
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        pre = {k: v for k, v in (("uid", uid), ("resourceVersion", resource_version)) if v}
        if pre:
            body["preconditions"] = pre
        if propagation:
            body["propagationPolicy"] = propagation
        if grace_period_seconds is not None:
            body["gracePeriodSeconds"] = grace_period_seconds
        if dry_run:
            body["dryRun"] = ["All"]
        return await self.request(
            "DELETE",
            resource.path(namespace, name),
            body=body,
            verb="delete",
            resource=resource.plural,
        )

    async def merge_patch(
        self,
        resource: Resource,
        name: str,
        patch: Mapping[str, Any],
        namespace: str | None = None,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> Any:
        """RFC 7386 JSON merge patch (null deletes a key)."""
        return await self.request(
            "PATCH",
            resource.path(namespace, name, subresource),
            query=_dry_run(dry_run),
            body=dict(patch),
            content_type=MERGE_PATCH,
            verb="patch",
            resource=resource.plural,
        )

    async def json_patch(
        self,
        resource: Resource,
        name: str,
        ops: Sequence[JsonPatchOp],
        namespace: str | None = None,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> Any:
        """RFC 6902 JSON patch; a failing `test` op makes the server refuse it (422)."""
        if not ops:
            raise ValueError("a JSON patch needs at least one operation")
        return await self.request(
            "PATCH",
            resource.path(namespace, name, subresource),
            query=_dry_run(dry_run),
            body=[dict(op) for op in ops],
            content_type=JSON_PATCH,
            verb="patch",
            resource=resource.plural,
        )

    async def apply(
        self,
        resource: Resource,
        body: Mapping[str, Any],
        *,
        field_manager: str | None = None,
        force: bool = False,
        subresource: str | None = None,
    ) -> Any:
        """Server-side apply of `body` (a partial object naming itself) as `field_manager`."""
        meta = body.get("metadata") or {}
        name = meta.get("name")
        if not isinstance(name, str) or not name:
            raise ValueError("metadata.name: required for server-side apply")
        if "apiVersion" not in body or "kind" not in body:
            raise ValueError("apiVersion and kind: required for server-side apply")
        query = [("fieldManager", field_manager or self.settings.field_manager)]
        if force:
            query.append(("force", "true"))
        return await self.request(
            "PATCH",
            resource.path(_namespace_of(resource, body), name, subresource),
            query=query,
            body=dict(body),
            content_type=APPLY_PATCH,
            verb="apply",
            resource=resource.plural,
        )

    async def patch_status(
        self,
        resource: Resource,
        name: str,
        status: Mapping[str, Any],
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
    ) -> Any:
        """Merge-patch `.status` through the status subresource (optionally guarded by RV)."""
        patch: dict[str, Any] = {"status": dict(status)}
        if resource_version:
            patch["metadata"] = {"resourceVersion": resource_version}
        return await self.merge_patch(resource, name, patch, namespace, subresource="status")


def _selectors(label_selector: str | None, field_selector: str | None) -> list[tuple[str, str]]:
    query: list[tuple[str, str]] = []
    if label_selector:
        query.append(("labelSelector", label_selector))
    if field_selector:
        query.append(("fieldSelector", field_selector))
    return query


def _dry_run(dry_run: bool) -> list[tuple[str, str]]:
    return [("dryRun", "All")] if dry_run else []


def _namespace_of(resource: Resource, body: Mapping[str, Any]) -> str | None:
    if not resource.namespaced:
        return None
    ns = (body.get("metadata") or {}).get("namespace")
    if not isinstance(ns, str) or not ns:
        raise ValueError(f"metadata.namespace: required for namespaced {resource.plural}")
    return ns


def _retry_after(response: aiohttp.ClientResponse) -> float | None:
    if response.status != 429 and response.status < 500:
        return None
    value = response.headers.get("Retry-After")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def _decode_json(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return {"message": raw[:200].decode("utf-8", "replace")}


async def _json_lines(response: aiohttp.ClientResponse) -> AsyncIterator[dict[str, Any]]:
    # Split by hand: a watch event can exceed aiohttp's line-length limit.
    remainder = b""
    async for chunk in response.content.iter_any():
        lines = (remainder + chunk).split(b"\n")
        remainder = lines.pop()
        for line in lines:
            if line.strip():
                event = json.loads(line)
                if isinstance(event, dict):
                    yield event
    if remainder.strip():
        event = json.loads(remainder)
        if isinstance(event, dict):
            yield event


class _Getter(Protocol):
    async def get(self, resource: Resource, name: str, namespace: str | None = None) -> Any: ...


async def get_or_none(
    client: _Getter, resource: Resource, name: str, namespace: str | None = None
) -> Mapping[str, Any] | None:
    """One object, or None when it does not exist (404); other errors raise ApiError."""
    try:
        found = await client.get(resource, name, namespace)
    except ApiError as error:
        if error.not_found:
            return None
        raise
    return found if isinstance(found, Mapping) else None
