"""The OpenAPI (Swagger 2.0) document of the subresource API, served at /openapi/v2."""

from __future__ import annotations

from typing import Any

from .subresources import (
    ADD_VOLUME,
    EVACUATE_CANCEL,
    GROUP,
    MEMORY_DUMP,
    OBJECT_GRAPH,
    PORT_FORWARD,
    READ_ACTIONS,
    REMOVE_VOLUME,
    VM_ACTIONS,
    VMI_ACTIONS,
    VOLUME_ACTIONS,
)

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
    "objectgraph": "v1.ObjectGraphOptions",
    EVACUATE_CANCEL: "v1.EvacuateCancelOptions",
    ADD_VOLUME: "v1.AddVolumeOptions",
    REMOVE_VOLUME: "v1.RemoveVolumeOptions",
    MEMORY_DUMP: "v1.VirtualMachineMemoryDumpRequest",
}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/definitions/{name}"}


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
    "v1.EvacuateCancelOptions": {
        "type": "object",
        "properties": {
            "evacuationNodeName": {"type": "string"},
            "dryRun": {"type": "array", "items": {"type": "string"}},
        },
    },
    # Only a persistentVolumeClaim source is served: a dataVolume needs CDI (refused, 400).
    "v1.AddVolumeOptions": {
        "type": "object",
        "required": ["name", "disk", "volumeSource"],
        "properties": {
            "name": {"type": "string"},
            "disk": {"type": "object"},
            "volumeSource": {
                "type": "object",
                "properties": {
                    "persistentVolumeClaim": {
                        "type": "object",
                        "required": ["claimName"],
                        "properties": {
                            "claimName": {"type": "string"},
                            "readOnly": {"type": "boolean"},
                            "hotpluggable": {"type": "boolean"},
                        },
                    },
                    "dataVolume": {"type": "object"},
                },
            },
            "dryRun": {"type": "array", "items": {"type": "string"}},
        },
    },
    "v1.RemoveVolumeOptions": {
        "type": "object",
        "required": ["name"],
        "properties": {
            "name": {"type": "string"},
            "dryRun": {"type": "array", "items": {"type": "string"}},
        },
    },
    # Only claimName is read: phase, remove and the rest are set by virt-api and the
    # controller (upstream's schema requires phase, which it then overwrites).
    "v1.VirtualMachineMemoryDumpRequest": {
        "type": "object",
        "properties": {"claimName": {"type": "string"}},
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
        "required": ["unfreezeTimeout"],
        "properties": {"unfreezeTimeout": {"type": "string"}},
    },
    "v1.ObjectGraphOptions": {
        "type": "object",
        "properties": {
            "includeOptionalNodes": {"type": "boolean"},
            "labelSelector": {
                "type": "object",
                "properties": {
                    "matchLabels": {"type": "object", "additionalProperties": {"type": "string"}}
                },
            },
        },
    },
    # The guest agent's reports, as upstream's OpenAPI names and shapes them.
    "v1.GuestAgentCommandInfo": {
        "type": "object",
        "required": ["name"],
        "properties": {"name": {"type": "string"}, "enabled": {"type": "boolean"}},
    },
    "v1.VirtualMachineInstanceGuestOSInfo": {
        "type": "object",
        "properties": {
            key: {"type": "string"}
            for key in (
                "id",
                "kernelRelease",
                "kernelVersion",
                "machine",
                "name",
                "prettyName",
                "version",
                "versionId",
            )
        },
    },
    "v1.VirtualMachineInstanceGuestOSUser": {
        "type": "object",
        "required": ["userName"],
        "properties": {
            "userName": {"type": "string"},
            "domain": {"type": "string"},
            "loginTime": {"type": "number", "format": "double"},
        },
    },
    "v1.VirtualMachineInstanceFileSystemDisk": {
        "type": "object",
        "required": ["busType"],
        "properties": {"busType": {"type": "string"}, "serial": {"type": "string"}},
    },
    "v1.VirtualMachineInstanceFileSystem": {
        "type": "object",
        "required": ["diskName", "mountPoint", "fileSystemType", "usedBytes", "totalBytes"],
        "properties": {
            "diskName": {"type": "string"},
            "mountPoint": {"type": "string"},
            "fileSystemType": {"type": "string"},
            "usedBytes": {"type": "integer", "format": "int32"},
            "totalBytes": {"type": "integer", "format": "int32"},
            "disk": {"type": "array", "items": _ref("v1.VirtualMachineInstanceFileSystemDisk")},
        },
    },
    "v1.VirtualMachineInstanceFileSystemInfo": {
        "type": "object",
        "required": ["disks"],
        "properties": {
            "disks": {"type": "array", "items": _ref("v1.VirtualMachineInstanceFileSystem")}
        },
    },
    "v1.VirtualMachineInstanceGuestAgentInfo": {
        "type": "object",
        "properties": {
            "guestAgentVersion": {"type": "string"},
            "supportedCommands": {"type": "array", "items": _ref("v1.GuestAgentCommandInfo")},
            "hostname": {"type": "string"},
            "os": _ref("v1.VirtualMachineInstanceGuestOSInfo"),
            "timezone": {"type": "string"},
            "userList": {"type": "array", "items": _ref("v1.VirtualMachineInstanceGuestOSUser")},
            "fsInfo": _ref("v1.VirtualMachineInstanceFileSystemInfo"),
            "fsFreezeStatus": {"type": "string"},
        },
    },
    "v1.VirtualMachineInstanceGuestOSUserList": {
        "type": "object",
        "required": ["items"],
        "properties": {
            "items": {"type": "array", "items": _ref("v1.VirtualMachineInstanceGuestOSUser")}
        },
    },
    "v1.VirtualMachineInstanceFileSystemList": {
        "type": "object",
        "required": ["items"],
        "properties": {
            "items": {"type": "array", "items": _ref("v1.VirtualMachineInstanceFileSystem")}
        },
    },
}
# What a GET subresource answers with (upstream's 200 schema).
_ANSWERS = {
    "guestosinfo": "v1.VirtualMachineInstanceGuestAgentInfo",
    "userlist": "v1.VirtualMachineInstanceGuestOSUserList",
    "filesystemlist": "v1.VirtualMachineInstanceFileSystemList",
}


_RESPONSES = {
    "200": {"description": "OK"},
    "202": {"description": "Accepted"},
    "400": {"description": "Bad Request"},
    "401": {"description": "Unauthorized"},
    "403": {"description": "Forbidden"},
    "404": {"description": "Not Found"},
    "409": {"description": "Conflict"},
    "413": {"description": "Request Entity Too Large"},
    # The API server (or the authorizer) could not be reached.
    "500": {"description": "Internal Server Error"},
}
# Relayed to the VMI's node: no virt-handler there, or one that sent garbage.
_RELAY_RESPONSES = {
    "502": {"description": "Bad Gateway"},
    "503": {"description": "Service Unavailable"},
}


def _operation(verb: str, resource: str, action: str) -> dict[str, Any]:
    operation: dict[str, Any] = {
        "operationId": f"{verb}{resource.capitalize()}{action.replace('-', '').capitalize()}",
        "parameters": list(_PARAMS),
        "responses": dict(_RESPONSES),
        "tags": ["subresources"],
    }
    relayed = resource == "virtualmachineinstances" and action not in (
        OBJECT_GRAPH,
        EVACUATE_CANCEL,
        *VOLUME_ACTIONS,
    )
    if relayed or action == PORT_FORWARD:
        operation["responses"].update(_RELAY_RESPONSES)
    if action in _ANSWERS:
        operation["responses"]["200"] = {"description": "OK", "schema": _ref(_ANSWERS[action])}
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
            verb = "get" if action in READ_ACTIONS else "put"
            path = f"/apis/{GROUP}/v1/namespaces/{{namespace}}/{resource}/{{name}}/{action}"
            paths[path] = {verb: _operation(verb, resource, action)}
    for resource in ("virtualmachines", "virtualmachineinstances"):
        path = f"/apis/{GROUP}/v1/namespaces/{{namespace}}/{resource}/{{name}}/{EVACUATE_CANCEL}"
        paths[path] = {"put": _operation("put", resource, EVACUATE_CANCEL)}
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
            "responses": {
                code: _RESPONSES[code] for code in ("200", "400", "401", "403", "413", "500")
            },
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
