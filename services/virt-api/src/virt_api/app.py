"""virt-api's aiohttp application: webhooks, the subresource API, discovery and health."""

from __future__ import annotations

import platform
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from service_kit import add_metrics_route

from .openapi import openapi_document
from .status import status_middleware
from .subresources import (
    GROUP,
    VERSIONS,
    SubresourceContext,
    add_subresource_routes,
    api_resource_list,
)
from .webhooks import AdmissionContext, add_webhook_routes

__all__ = ["VERSION_INFO", "build_app"]

VERSION_INFO: dict[str, Any] = {
    "gitVersion": "v0.1.0-kubevirt-py",
    "gitCommit": "",
    "gitTreeState": "",
    "buildDate": "",
    "goVersion": "",
    "compiler": "cpython",
    "platform": f"{platform.system().lower()}/{platform.machine()}",
    "pythonVersion": platform.python_version(),
}


def _json(body: dict[str, Any]) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def handle(request: web.Request) -> web.Response:
        return web.json_response(body)

    return handle


async def _ok(request: web.Request) -> web.Response:
    return web.Response(text="ok")


def build_app(admission: AdmissionContext, subresources: SubresourceContext) -> web.Application:
    """The whole HTTP surface; TLS and client certificates are the server's concern."""
    app = web.Application(client_max_size=3 * 1024 * 1024 + 1024, middlewares=[status_middleware])
    add_webhook_routes(app, admission)
    add_subresource_routes(app, subresources)
    group_versions = [{"groupVersion": f"{GROUP}/{v}", "version": v} for v in VERSIONS]
    api_group = {"name": GROUP, "versions": group_versions, "preferredVersion": group_versions[0]}
    add_metrics_route(app, admission.metrics)
    app.router.add_get("/healthz", _ok)
    app.router.add_get("/readyz", _ok)
    app.router.add_get(
        "/apis", _json({"kind": "APIGroupList", "apiVersion": "v1", "groups": [api_group]})
    )
    app.router.add_get(
        f"/apis/{GROUP}", _json({"kind": "APIGroup", "apiVersion": "v1", **api_group})
    )
    app.router.add_get("/openapi/v2", _json(openapi_document()))
    for version in VERSIONS:
        app.router.add_get(f"/apis/{GROUP}/{version}", _json(api_resource_list(version)))
        app.router.add_get(f"/apis/{GROUP}/{version}/version", _json(VERSION_INFO))
        app.router.add_get(f"/apis/{GROUP}/{version}/healthz", _ok)
    return app
