"""KubeClient over HTTP against a tiny loopback server: verbs, patches, errors, timeouts."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from kube_runtime import (
    CONFIGMAPS,
    PODS,
    SUBJECT_ACCESS_REVIEWS,
    ApiError,
    ClientSettings,
    InMemoryMetrics,
    KubeClient,
    ManualClock,
    ResourceExpiredError,
    RestListWatch,
)
from kubernetes_asyncio.client import ApiClient, Configuration


class Server:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.stall = asyncio.Event()
        self.busy = 0

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.requests.append(
            {
                "method": request.method,
                "path": request.path,
                "query": dict(request.query),
                "content_type": request.headers.get("Content-Type"),
                "body": json.loads(body) if body else None,
            }
        )
        name = request.path.rsplit("/", 1)[-1]
        if name == "busy" and self.busy > 0:
            self.busy -= 1
            return web.json_response(
                {
                    "kind": "Status",
                    "code": 429,
                    "reason": "TooManyRequests",
                    "message": "slow down",
                },
                status=429,
                headers={"Retry-After": "1"},
            )
        if name == "missing":
            return web.json_response(
                {"kind": "Status", "code": 404, "reason": "NotFound", "message": "nope"}, status=404
            )
        if request.query.get("watch") == "true":
            if request.query.get("resourceVersion") == "1":
                return web.json_response(
                    {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"},
                    status=410,
                )
            response = web.StreamResponse()
            await response.prepare(request)
            event = {"type": "ADDED", "object": {"metadata": {"name": "w", "resourceVersion": "7"}}}
            await response.write(json.dumps(event).encode() + b"\n")
            if request.query.get("resourceVersion") == "cut":
                assert request.transport is not None
                request.transport.close()  # the connection drops mid-stream
                return response
            await self.stall.wait()  # a stalled connection: nothing more, never closed
            return response
        if request.method == "GET" and name == "configmaps":
            return web.json_response(
                {
                    "kind": "ConfigMapList",
                    "metadata": {"resourceVersion": "5"},
                    "items": [{"metadata": {"name": "x", "namespace": "ns"}}],
                }
            )
        return web.json_response({"metadata": {"name": name}, "echo": True})


@pytest.fixture
async def server() -> AsyncIterator[tuple[Server, str]]:
    srv = Server()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", srv.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield srv, f"http://127.0.0.1:{port}"
    srv.stall.set()
    await runner.cleanup()


def make_client(host: str, **settings: Any) -> tuple[KubeClient, InMemoryMetrics]:
    config = Configuration(host=host)
    metrics = InMemoryMetrics()
    return KubeClient(
        ApiClient(config), settings=ClientSettings(**settings), metrics=metrics
    ), metrics


async def test_patch_helpers_send_the_right_content_types_and_paths(
    server: tuple[Server, str],
) -> None:
    srv, host = server
    client, _ = make_client(host, field_manager="virt-controller")
    async with client:
        await client.merge_patch(CONFIGMAPS, "a", {"data": {"k": None}}, "ns")
        await client.json_patch(
            CONFIGMAPS,
            "a",
            [{"op": "test", "path": "/data/k", "value": "1"}, {"op": "remove", "path": "/data/k"}],
            "ns",
        )
        await client.apply(
            CONFIGMAPS,
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "ns"}},
            force=True,
        )
        await client.patch_status(CONFIGMAPS, "a", {"phase": "Running"}, "ns", resource_version="9")
    got = [(r["path"], r["content_type"], r["query"]) for r in srv.requests]
    assert got == [
        ("/api/v1/namespaces/ns/configmaps/a", "application/merge-patch+json", {}),
        ("/api/v1/namespaces/ns/configmaps/a", "application/json-patch+json", {}),
        (
            "/api/v1/namespaces/ns/configmaps/a",
            "application/apply-patch+yaml",
            {"fieldManager": "virt-controller", "force": "true"},
        ),
        ("/api/v1/namespaces/ns/configmaps/a/status", "application/merge-patch+json", {}),
    ]
    assert srv.requests[0]["body"] == {"data": {"k": None}}
    assert srv.requests[1]["body"][0] == {"op": "test", "path": "/data/k", "value": "1"}
    assert srv.requests[3]["body"] == {
        "status": {"phase": "Running"},
        "metadata": {"resourceVersion": "9"},
    }


async def test_dry_run_writes_ask_the_server_to_store_nothing(
    server: tuple[Server, str],
) -> None:
    srv, host = server
    client, _ = make_client(host)
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview"}
    async with client:
        await client.create(PODS, {"metadata": {"namespace": "ns"}}, dry_run=True)
        await client.json_patch(
            PODS, "p", [{"op": "remove", "path": "/x"}], "ns", subresource="status", dry_run=True
        )
        await client.merge_patch(PODS, "p", {"x": 1}, "ns", dry_run=True)
        await client.delete(PODS, "p", "ns", grace_period_seconds=1, dry_run=True)
        await client.delete(PODS, "p", "ns")
        await client.create(SUBJECT_ACCESS_REVIEWS, review)
    got = [(r["method"], r["path"], r["query"]) for r in srv.requests]
    assert got == [
        ("POST", "/api/v1/namespaces/ns/pods", {"dryRun": "All"}),
        ("PATCH", "/api/v1/namespaces/ns/pods/p/status", {"dryRun": "All"}),
        ("PATCH", "/api/v1/namespaces/ns/pods/p", {"dryRun": "All"}),
        ("DELETE", "/api/v1/namespaces/ns/pods/p", {}),
        ("DELETE", "/api/v1/namespaces/ns/pods/p", {}),
        ("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", {}),
    ]
    assert srv.requests[3]["body"] == {
        "apiVersion": "v1",
        "kind": "DeleteOptions",
        "gracePeriodSeconds": 1,
        "dryRun": ["All"],
    }
    assert srv.requests[4]["body"] == {"apiVersion": "v1", "kind": "DeleteOptions"}


async def test_errors_carry_status_and_count_in_kubevirt_metrics(
    server: tuple[Server, str],
) -> None:
    _, host = server
    client, metrics = make_client(host)
    async with client:
        with pytest.raises(ApiError) as info:
            await client.get(CONFIGMAPS, "missing", "ns")
        await client.get(CONFIGMAPS, "present", "ns")
    assert info.value.not_found
    assert info.value.message == "nope"
    labels = {"method": "GET", "resource": "configmaps", "verb": "get"}
    host_label = host.removeprefix("http://")
    assert (
        metrics.value(
            "kubevirt_rest_client_requests_total", {**labels, "host": host_label, "code": "404"}
        )
        == 1
    )
    assert (
        metrics.value(
            "kubevirt_rest_client_requests_total", {**labels, "host": host_label, "code": "200"}
        )
        == 1
    )


async def test_watch_checks_http_status_before_streaming(server: tuple[Server, str]) -> None:
    _, host = server
    client, _ = make_client(host)
    source = RestListWatch(client, CONFIGMAPS, namespace="ns", read_timeout=5)
    async with client:
        with pytest.raises(ResourceExpiredError):
            async with source.watch(resource_version="1", timeout_seconds=10):
                pass


async def test_a_stalled_watch_is_cut_by_the_read_timeout(server: tuple[Server, str]) -> None:
    _, host = server
    client, _ = make_client(host)
    source = RestListWatch(client, CONFIGMAPS, namespace="ns", read_timeout=0.3)
    seen: list[str] = []

    async def consume() -> None:
        async with source.watch(resource_version="5", timeout_seconds=300) as events:
            async for event in events:
                seen.append(event.object["metadata"]["name"])

    async with client:
        with pytest.raises(TimeoutError):
            await consume()
    assert seen == ["w"]


async def test_a_watch_cut_mid_stream_raises_connection_error(server: tuple[Server, str]) -> None:
    _, host = server
    client, _ = make_client(host)
    source = RestListWatch(client, CONFIGMAPS, namespace="ns", read_timeout=5)
    seen: list[str] = []

    async def consume() -> None:
        async with source.watch(resource_version="cut", timeout_seconds=300) as events:
            async for event in events:
                seen.append(event.object["metadata"]["name"])

    async with client:
        # What the reflector takes as "connection lost": a normal end, re-watched at once.
        with pytest.raises(ConnectionError):
            await asyncio.wait_for(consume(), 5)
    assert seen == ["w"]


async def test_list_items_get_kind_and_api_version(server: tuple[Server, str]) -> None:
    _, host = server
    client, _ = make_client(host)
    async with client:
        page = await RestListWatch(client, CONFIGMAPS).list_page(limit=10, continue_token="")
    assert page.resource_version == "5"
    assert page.items[0]["kind"] == "ConfigMap"
    assert page.items[0]["apiVersion"] == "v1"


async def test_qps_and_burst_limit_requests() -> None:
    from kube_runtime import TokenBucket

    clock = ManualClock()
    bucket = TokenBucket(qps=2, burst=3, clock=clock)
    delays = [bucket.reserve() for _ in range(5)]
    assert delays == [0.0, 0.0, 0.0, 0.5, 1.0]
    await clock.advance(10)
    assert bucket.reserve() == 0.0


async def test_apply_and_create_name_the_missing_field() -> None:
    client = KubeClient(ApiClient(Configuration(host="http://127.0.0.1:9")))
    async with client:
        with pytest.raises(ValueError, match=r"metadata\.name"):
            await client.apply(CONFIGMAPS, {"apiVersion": "v1", "kind": "ConfigMap"})
        with pytest.raises(ValueError, match=r"metadata\.namespace"):
            await client.create(CONFIGMAPS, {"metadata": {"name": "a"}})


async def test_429_with_retry_after_is_retried_then_reported(server: tuple[Server, str]) -> None:
    srv, host = server
    config = Configuration(host=host)
    clock = ManualClock()
    client = KubeClient(ApiClient(config), settings=ClientSettings(max_retries=2), clock=clock)
    async with client:
        srv.busy = 2
        call = asyncio.ensure_future(client.get(CONFIGMAPS, "busy", "ns"))
        while not call.done():
            await clock.advance(0.5)
        assert call.result()["metadata"]["name"] == "busy"
        assert clock.monotonic() - 1000.0 >= 2.0, "waited Retry-After twice"
        srv.busy = 5
        failing = asyncio.ensure_future(client.get(CONFIGMAPS, "busy", "ns"))
        while not failing.done():
            await clock.advance(0.5)
        with pytest.raises(ApiError) as info:
            failing.result()
    assert info.value.status == 429
    assert sum(r["path"].endswith("/busy") for r in srv.requests) == 6


async def test_request_timeout_none_means_no_deadline(server: tuple[Server, str]) -> None:
    # kubectl's --request-timeout=0: calls still work, without a total deadline.
    _, host = server
    client, _ = make_client(host, request_timeout=None)
    async with client:
        assert (await client.get(CONFIGMAPS, "a", "ns"))["echo"] is True
    with pytest.raises(ValueError, match="timeouts must be > 0"):
        ClientSettings(request_timeout=0)
