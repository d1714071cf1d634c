"""The OpenAPI (Swagger 2.0) document of the subresource API, served at /openapi/v2."""

from __future__ import annotations

from typing import Any

from .subresources import GROUP, PORT_FORWARD, VM_ACTIONS, VMI_ACTIONS

__all__ = ["openapi_document"]

_PARAMS = [
    {"name": "namespace", "in": "path", "required": True, "type": "string"},
    {"name": "name", "in": "path", "required": True, "type": "string"},
]
_OPTIONS = {
    "start": "v1.StartOptions",
    "stop": "v1.StopOptions",
    "restart": "v1.RestartOptions",
    "migrate": "v1.MigrateOptions",
    "pause": "v1.PauseOptions",
    "unpause": "v1.UnpauseOptions",
    "freeze": "v1.FreezeUnfreezeTimeout",
}
_DEFINITIONS: dict[str, Any] = {
    "v1.StartOptions": {
        "type": "object",
        "properties": {
            "paused": {"type": "boolean"},
            "dryRun": {"type": "array", "items": {"type": "string"}},
        },
    },
    "v1.StopOptions": {
        "type": "object",
        "properties": {
            "gracePeriod": {"type": "integer", "format": "int64"},
            "dryRun": {"type": "array", "items": {"type": "string"}},
        },
    },
    "v1.RestartOptions": {
        "type": "object",
        "properties": {
            "gracePeriodSeconds": {"type": "integer", "format": "int64"},
            "dryRun": {"type": "array", "items": {"type": "string"}},
        },
    },
    "v1.MigrateOptions": {
        "type": "object",
        "properties": {
            "addedNodeSelector": {"type": "object", "additionalProperties": {"type": "string"}},
            "dryRun": {"type": "array", "items": {"type": "string"}},
        },
    },
    "v1.PauseOptions": {
        "type": "object",
        "properties": {"dryRun": {"type": "array", "items": {"type": "string"}}},
    },
    "v1.UnpauseOptions": {
        "type": "object",
        "properties": {"dryRun": {"type": "array", "items": {"type": "string"}}},
    },
    "v1.FreezeUnfreezeTimeout": {
        "type": "object",
        "properties": {"unfreezeTimeout": {"type": "string"}},
    },
}


def _operation(verb: str, resource: str, action: str) -> dict[str, Any]:
    operation: dict[str, Any] = {
        "operationId": f"{verb}{resource.capitalize()}{action.replace('-', '').capitalize()}",
        "parameters": list(_PARAMS),
        "responses": {
            "200": {"description": "OK"},
            "202": {"description": "Accepted"},
            "401": {"description": "Unauthorized"},
            "403": {"description": "Forbidden"},
            "404": {"description": "Not Found"},
            "409": {"description": "Conflict"},
        },
        "tags": ["subresources"],
    }
    if action in _OPTIONS:
        operation["parameters"].append(
            {"name": "body", "in": "body", "schema": {"$ref": f"#/definitions/{_OPTIONS[action]}"}}
        )
    return operation


def openapi_document(version: str = "v0.1.0") -> dict[str, Any]:
    """Swagger 2.0 for every served subresource route (v1; v1alpha3 mirrors it)."""
    paths: dict[str, Any] = {}
    for resource, actions in (
        ("virtualmachines", VM_ACTIONS),
        ("virtualmachineinstances", VMI_ACTIONS),
    ):
        for action in actions:
            verb = "get" if action in ("guestosinfo", "console", "vnc", "expand-spec") else "put"
            path = f"/apis/{GROUP}/v1/namespaces/{{namespace}}/{resource}/{{name}}/{action}"
            paths[path] = {verb: _operation(verb, resource, action)}
    for resource in ("virtualmachines", "virtualmachineinstances"):
        base = f"/apis/{GROUP}/v1/namespaces/{{namespace}}/{resource}/{{name}}/{PORT_FORWARD}"
        for tail, extra in (("{port}", ["port"]), ("{port}/{protocol}", ["port", "protocol"])):
            operation = _operation("get", resource, PORT_FORWARD)
            operation["operationId"] += "".join(p.capitalize() for p in extra)
            operation["parameters"] += [
                {
                    "name": p,
                    "in": "path",
                    "required": True,
                    "type": "integer" if p == "port" else "string",
                }
                for p in extra
            ]
            paths[f"{base}/{tail}"] = {"get": operation}
    paths[f"/apis/{GROUP}/v1/namespaces/{{namespace}}/expand-vm-spec"] = {
        "put": {
            "operationId": "expandVMSpec",
            "parameters": [
                _PARAMS[0],
                {"name": "body", "in": "body", "schema": {"type": "object"}},
            ],
            "responses": {"200": {"description": "OK"}},
        }
    }
    for leaf in ("version", "healthz"):
        paths[f"/apis/{GROUP}/v1/{leaf}"] = {
            "get": {
                "operationId": f"get{leaf.capitalize()}",
                "responses": {"200": {"description": "OK"}},
            }
        }
    return {
        "swagger": "2.0",
        "info": {"title": "KubeVirt subresources (kubevirt-py)", "version": version},
        "paths": paths,
        "definitions": _DEFINITIONS,
    }
