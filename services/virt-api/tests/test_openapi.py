"""virt-api's OpenAPI document (served at /openapi/v2) names exactly the subresource routes
it serves, with their methods: schemathesis fuzzes from it (integration/virt_api/
test_schema_fuzz.py), so a route left out is a route never fuzzed."""

from __future__ import annotations

import re

from aiohttp import web
from virt_api.openapi import openapi_document
from virt_api.subresources import GROUP, add_subresource_routes

SAMPLES = {"namespace": "ns1", "name": "vm1", "port": "22", "protocol": "tcp"}


def _served() -> list[tuple[str, re.Pattern[str]]]:
    app = web.Application()
    add_subresource_routes(app, None)  # type: ignore[arg-type]  # only the routes are read
    served = []
    for route in app.router.routes():
        info = route.resource.get_info() if route.resource else {}
        pattern = info.get("pattern") or re.compile(re.escape(info.get("path", "")))
        if route.method != "HEAD" and "v1alpha3" not in pattern.pattern:
            served.append((route.method, pattern))
    return served


def _documented() -> list[tuple[str, str]]:
    documented = []
    for path, operations in openapi_document()["paths"].items():
        concrete = re.sub(r"\{(\w+)\}", lambda m: SAMPLES[m.group(1)], path)
        documented += [(method.upper(), concrete) for method in operations]
    return documented


def test_the_document_names_every_served_route_and_no_other() -> None:
    served, documented = _served(), _documented()
    for method, pattern in served:
        assert any(m == method and pattern.fullmatch(p) for m, p in documented), (
            f"{method} {pattern.pattern} is served but not in the document"
        )
    for method, path in documented:
        if path.startswith(f"/apis/{GROUP}/v1/namespaces/"):
            assert any(m == method and pattern.fullmatch(path) for m, pattern in served), (
                f"{method} {path} is in the document but not served"
            )
