"""The subresource API behind the APIService v1.subresources.kubevirt.io.

Every call under /namespaces/ is authenticated (front proxy), authorized (a
SubjectAccessReview for the forwarded user), then served: VM lifecycle calls become
patches of the fields virt-api owns; VMI calls are relayed to virt-handler.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import aiohttp
import structlog
from aiohttp import web
from kube_runtime import PERSISTENT_VOLUME_CLAIMS, PODS, ApiError, KubeClient, Resource
from kubevirt_api import ClusterConfig
from kubevirt_api.defaults import DefaultsConfig
from kubevirt_api.durations import DurationError, parse_duration
from kubevirt_api.enums import VirtualMachineInstancePhase as Phase
from kubevirt_api.resources import (
    VIRTUAL_MACHINE_INSTANCE_MIGRATIONS,
    VIRTUAL_MACHINE_INSTANCES,
    VIRTUAL_MACHINES,
)
from service_kit import MetricsRegistry, pump_until_either_ends

from .authz import ResourceAttributes, authorize, rbac_verb
from .body import BodyTooLargeError, read_body
from .frontproxy import FrontProxyConfig, UnauthenticatedError, identify
from .instancetypes import expand
from .lifecycle import Conflict, Invalid, Patch, Plan, plan_restart, plan_start, plan_stop
from .memorydump import (
    NO_DUMP_BODY,
    check_claim,
    choose_claim,
    parse_memory_dump,
    plan_memory_dump,
    plan_remove_memory_dump,
)
from .metrics import ApiMetrics
from .objectgraph import (
    GraphOptionsError,
    filter_graph,
    graph_options,
    launcher_pod_name,
    vm_graph,
    vmi_graph,
)
from .relay import AGENT_REPORTS, HandlerClient, HandlerError
from .status import StatusError, status_response
from .volumes import (
    NO_BODY,
    AddVolume,
    parse_add_volume,
    parse_remove_volume,
    plan_add_volume,
    plan_remove_volume,
)

__all__ = [
    "ADD_VOLUME",
    "EVACUATE_CANCEL",
    "GROUP",
    "MEMORY_DUMP",
    "MEMORY_DUMP_ACTIONS",
    "NO_AGENT",
    "OBJECT_GRAPH",
    "PORT_FORWARD",
    "PORT_FORWARD_PROTOCOLS",
    "READ_ACTIONS",
    "REMOVE_MEMORY_DUMP",
    "REMOVE_VOLUME",
    "SCREENSHOT",
    "VERSIONS",
    "VMI_ACTIONS",
    "VMI_NOT_RUNNING",
    "VM_ACTIONS",
    "VOLUME_ACTIONS",
    "SubresourceContext",
    "add_subresource_routes",
    "api_resource_list",
]

log = structlog.get_logger("virt_api.subresources")

GROUP = "subresources.kubevirt.io"
OBJECT_GRAPH = "objectgraph"
SCREENSHOT = "vnc/screenshot"
# Subresources read with GET (the rest are PUT).
READ_ACTIONS = frozenset(
    {*AGENT_REPORTS, "console", "vnc", SCREENSHOT, "expand-spec", OBJECT_GRAPH}
)
VERSIONS = ("v1", "v1alpha3")
MAX_BODY = 64 * 1024
# Volume hotplug, on VMs (their template: declarative hotplug) and on VMIs alike.
ADD_VOLUME = "addvolume"
REMOVE_VOLUME = "removevolume"
VOLUME_ACTIONS = (ADD_VOLUME, REMOVE_VOLUME)
# A VM's memory dump into a claim (status.memoryDumpRequest); VMs only, as upstream.
MEMORY_DUMP = "memorydump"
REMOVE_MEMORY_DUMP = "removememorydump"
MEMORY_DUMP_ACTIONS = (MEMORY_DUMP, REMOVE_MEMORY_DUMP)
VM_ACTIONS = (
    "start",
    "stop",
    "restart",
    "migrate",
    "expand-spec",
    OBJECT_GRAPH,
    *VOLUME_ACTIONS,
    *MEMORY_DUMP_ACTIONS,
)
VMI_ACTIONS = (
    "pause",
    "unpause",
    "softreboot",
    "reset",
    "freeze",
    "unfreeze",
    "guestosinfo",
    "userlist",
    "filesystemlist",
    "console",
    "vnc",
    SCREENSHOT,
    OBJECT_GRAPH,
    *VOLUME_ACTIONS,
)
# `…/{vm,vmi}/{name}/evacuate/cancel`: clear status.evacuationNodeName (upstream's path:
# upstream's virtctl calls it so).
EVACUATE_CANCEL = "evacuate/cancel"
#: upstream's 409 for a call that needs the VMI running.
VMI_NOT_RUNNING = "VMI is not running"
#: upstream's 409 for an agent subresource (or freeze) of a VMI without the agent.
NO_AGENT = "VMI does not have guest agent connected"
# `…/{vm,vmi}/{name}/portforward/{port}[/{protocol}]`: a websocket to a port of the guest.
PORT_FORWARD = "portforward"
PORT_FORWARD_PROTOCOLS = ("tcp", "udp")


async def _stock_config() -> ClusterConfig:
    return ClusterConfig()


@dataclass
class SubresourceContext:
    """What subresource handlers use: the API server, the front proxy, virt-handler, and
    the cluster configuration (feature gates)."""

    api: KubeClient
    front_proxy: FrontProxyConfig
    handlers: HandlerClient
    cluster_config: Callable[[], Awaitable[ClusterConfig]] = _stock_config
    metrics: ApiMetrics = field(default_factory=lambda: ApiMetrics(MetricsRegistry()))


async def _get(
    api: KubeClient, resource: Resource, namespace: str | None, name: str, what: str
) -> Mapping[str, Any] | None:
    try:
        found = await api.get(resource, name, namespace)
    except ApiError as error:
        if error.not_found:
            return None
        if error.status == 400:
            # The API server refused the name or namespace the caller gave (e.g. one with
            # a '%'): the caller's mistake, not virt-api's.
            raise StatusError(400, error.message) from error
        raise StatusError(500, f"reading {what}: {error.message}") from error
    if not isinstance(found, Mapping):
        raise StatusError(500, f"the API server sent {what} that is not an object")
    return found


async def _body(request: web.Request) -> Mapping[str, Any]:
    """The JSON options body (may be empty); refuse anything but a small JSON object."""
    try:
        raw = await read_body(request, MAX_BODY)
    except BodyTooLargeError as error:
        raise StatusError(413, f"the request body is limited to {MAX_BODY} bytes") from error
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError) as error:
        # RecursionError: nesting deeper than the parser's stack, e.g. "[[[[...".
        raise StatusError(400, f"the request body is not JSON: {error}") from error
    if not isinstance(body, Mapping):
        raise StatusError(400, "the request body must be a JSON object")
    return body


def _dry_run(body: Mapping[str, Any]) -> bool:
    value = body.get("dryRun")
    if value is None:
        return False
    if not isinstance(value, list) or not all(v == "All" for v in value):
        raise StatusError(400, 'dryRun must be a list whose only allowed value is "All"')
    return bool(value)


def _optional_int(body: Mapping[str, Any], key: str) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise StatusError(400, f"{key} must be an integer")
    return value


async def _apply(api: KubeClient, plan: Plan, namespace: str, name: str, dry_run: bool) -> None:
    for patch in plan.patches:
        resource = VIRTUAL_MACHINE_INSTANCES if patch.target == "vmi" else VIRTUAL_MACHINES
        try:
            await api.json_patch(
                resource,
                name,
                patch.ops,
                namespace,
                subresource="status" if patch.target == "vm-status" else None,
                dry_run=dry_run,
            )
        except ApiError as error:
            if error.status in (409, 422) and "test" in error.message.lower():
                raise StatusError(
                    409, f"the VM changed meanwhile, retry: {error.message}"
                ) from error
            if error.status == 404:
                raise StatusError(404, f"{name} disappeared: {error.message}") from error
            if error.status in (400, 403, 409, 422):
                raise StatusError(error.status, error.message) from error
            raise StatusError(500, f"patching {name}: {error.message}") from error


def _outcome(result: Plan | Conflict | Invalid) -> Plan:
    if isinstance(result, Conflict):
        raise StatusError(409, result.message)
    if isinstance(result, Invalid):
        raise StatusError(400, result.message)
    return result


async def _vm_and_vmi(
    api: KubeClient, namespace: str, name: str
) -> tuple[Mapping[str, Any], Mapping[str, Any] | None]:
    vm = await _get(api, VIRTUAL_MACHINES, namespace, name, "the VirtualMachine")
    if vm is None:
        raise StatusError(404, f'virtualmachines.kubevirt.io "{name}" not found')
    vmi = await _get(api, VIRTUAL_MACHINE_INSTANCES, namespace, name, "the VirtualMachineInstance")
    return vm, vmi


async def _start(
    ctx: SubresourceContext, request: web.Request, namespace: str, name: str
) -> web.StreamResponse:
    body = await _body(request)
    paused = body.get("paused", False)
    if not isinstance(paused, bool):
        raise StatusError(400, "paused must be a boolean")
    dry_run = _dry_run(body)
    vm, vmi = await _vm_and_vmi(ctx.api, namespace, name)
    await _apply(ctx.api, _outcome(plan_start(vm, vmi, paused=paused)), namespace, name, dry_run)
    return web.Response(status=202)


async def _stop(
    ctx: SubresourceContext, request: web.Request, namespace: str, name: str
) -> web.StreamResponse:
    body = await _body(request)
    grace = _optional_int(body, "gracePeriod")
    dry_run = _dry_run(body)
    vm, vmi = await _vm_and_vmi(ctx.api, namespace, name)
    await _apply(
        ctx.api, _outcome(plan_stop(vm, vmi, grace_period=grace)), namespace, name, dry_run
    )
    return web.Response(status=202)


async def _restart(
    ctx: SubresourceContext, request: web.Request, namespace: str, name: str
) -> web.StreamResponse:
    body = await _body(request)
    grace = _optional_int(body, "gracePeriodSeconds")
    dry_run = _dry_run(body)
    vm, vmi = await _vm_and_vmi(ctx.api, namespace, name)
    await _apply(
        ctx.api, _outcome(plan_restart(vm, vmi, grace_period=grace)), namespace, name, dry_run
    )
    if grace == 0 and vmi is not None:
        # A forced restart also deletes the launcher pod: CRDs know no grace periods.
        await _delete_launcher_pod(ctx.api, namespace, vmi, dry_run)
    return web.Response(status=202)


async def _delete_launcher_pod(
    api: KubeClient, namespace: str, vmi: Mapping[str, Any], dry_run: bool
) -> None:
    """Delete the VMI's running launcher pod (matched by its creator's uid) with a 1 s grace."""
    uid = str((vmi.get("metadata") or {}).get("uid") or "")
    try:
        pods = await api.list(
            PODS,
            namespace,
            label_selector=f"kubevirt.io=virt-launcher,kubevirt.io/created-by={uid}",
            field_selector="status.phase=Running",
        )
    except ApiError as error:
        raise StatusError(500, f"listing launcher pods: {error.message}") from error
    raw_items = pods.get("items") if isinstance(pods, Mapping) else None
    items = [p for p in raw_items or [] if isinstance(p, Mapping)]
    if not items:
        return
    # Two running pods mean a migration: the target is the one the VMI now names.
    target = ((vmi.get("status") or {}).get("migrationState") or {}).get("targetPod")
    pod = next((p for p in items if (p.get("metadata") or {}).get("name") == target), items[0])
    pod_name = str((pod.get("metadata") or {}).get("name"))
    try:
        await api.delete(PODS, pod_name, namespace, grace_period_seconds=1, dry_run=dry_run)
    except ApiError as error:
        if not error.not_found:
            raise StatusError(500, f"deleting launcher pod {pod_name}: {error.message}") from error


async def _migrate(
    ctx: SubresourceContext, request: web.Request, namespace: str, name: str
) -> web.StreamResponse:
    body = await _body(request)
    dry_run = _dry_run(body)
    selector = body.get("addedNodeSelector")
    if selector is not None and not (
        isinstance(selector, Mapping) and all(isinstance(v, str) for v in selector.values())
    ):
        raise StatusError(400, "addedNodeSelector must map label names to strings")
    _vm, vmi = await _vm_and_vmi(ctx.api, namespace, name)
    if vmi is None or (vmi.get("status") or {}).get("phase") != Phase.RUNNING:
        raise StatusError(409, "VM is not running")
    spec: dict[str, Any] = {"vmiName": name}
    if selector:
        spec["addedNodeSelector"] = dict(selector)
    migration = {
        "apiVersion": VIRTUAL_MACHINE_INSTANCE_MIGRATIONS.api_version,
        "kind": VIRTUAL_MACHINE_INSTANCE_MIGRATIONS.kind,
        "metadata": {"generateName": "kubevirt-migrate-vm-"},
        "spec": spec,
    }
    try:
        await ctx.api.create(
            VIRTUAL_MACHINE_INSTANCE_MIGRATIONS, migration, namespace, dry_run=dry_run
        )
    except ApiError as error:
        raise StatusError(error.status if error.status < 500 else 500, error.message) from error
    return web.Response(status=202)


async def _evacuate_cancel(
    ctx: SubresourceContext, request: web.Request, namespace: str, name: str
) -> web.StreamResponse:
    """Stop an evacuation: remove the VMI's evacuationNodeName if it still names the node
    the caller saw (body {"evacuationNodeName": ..., "dryRun": [...]}); 200 when none."""
    body = await _body(request)
    dry_run = _dry_run(body)
    vmi = await _get(
        ctx.api, VIRTUAL_MACHINE_INSTANCES, namespace, name, "the VirtualMachineInstance"
    )
    if vmi is None:
        raise StatusError(404, f'virtualmachineinstances.kubevirt.io "{name}" not found')
    marked = (vmi.get("status") or {}).get("evacuationNodeName")
    if not marked:
        return web.Response(status=200)
    path = "/status/evacuationNodeName"
    ops: list[Any] = [
        {"op": "test", "path": path, "value": body.get("evacuationNodeName")},
        {"op": "remove", "path": path},
    ]
    try:
        await ctx.api.json_patch(VIRTUAL_MACHINE_INSTANCES, name, ops, namespace, dry_run=dry_run)
    except ApiError as error:
        raise StatusError(500, error.message) from error
    return web.Response(status=200)


def _owned_by_vm(vmi: Mapping[str, Any]) -> bool:
    for ref in (vmi.get("metadata") or {}).get("ownerReferences") or []:
        if (
            isinstance(ref, Mapping)
            and ref.get("controller") is True
            and ref.get("kind") == VIRTUAL_MACHINES.kind
            and ref.get("apiVersion") == VIRTUAL_MACHINES.api_version
        ):
            return True
    return False


async def _volume(
    ctx: SubresourceContext, request: web.Request, namespace: str, name: str
) -> web.StreamResponse:
    """addvolume/removevolume: patch the VMI's spec, or the VM's template (upstream's
    declarative hotplug: virt-controller then plugs it into the running VMI)."""
    if not request.body_exists:
        raise StatusError(400, NO_BODY)
    body = await _body(request)
    dry_run = _dry_run(body)
    adding = request.match_info["action"] == ADD_VOLUME
    parsed = parse_add_volume(body) if adding else parse_remove_volume(body)
    if isinstance(parsed, Invalid):
        raise StatusError(400, parsed.message)
    target: Literal["vm", "vmi"]
    if request.match_info["resource"] == "virtualmachineinstances":
        vmi = await _get(
            ctx.api, VIRTUAL_MACHINE_INSTANCES, namespace, name, "the VirtualMachineInstance"
        )
        if vmi is None:
            raise StatusError(404, f'virtualmachineinstances.kubevirt.io "{name}" not found')
        if _owned_by_vm(vmi) and not (await ctx.cluster_config()).gate("HotplugVolumes"):
            # Its VM's template is the truth (the VM controller would unplug it again).
            raise StatusError(
                400,
                f"VMI {namespace}/{name} is owned by a VM; add or remove the volume through "
                "the VirtualMachine's subresource instead",
            )
        if (vmi.get("status") or {}).get("phase") != Phase.RUNNING:
            raise StatusError(409, VMI_NOT_RUNNING)
        spec, prefix, target = vmi.get("spec") or {}, "", "vmi"
    else:
        vm = await _get(ctx.api, VIRTUAL_MACHINES, namespace, name, "the VirtualMachine")
        if vm is None:
            raise StatusError(404, f'virtualmachines.kubevirt.io "{name}" not found')
        template = ((vm.get("spec") or {}).get("template") or {}).get("spec") or {}
        spec, prefix, target = template, "/spec/template", "vm"
    if not isinstance(spec, Mapping):
        raise StatusError(500, f"{name}'s spec is not an object")
    ops = (
        plan_add_volume(spec, prefix, parsed)
        if isinstance(parsed, AddVolume)
        else plan_remove_volume(spec, prefix, parsed)
    )
    if isinstance(ops, Conflict):
        raise StatusError(409, ops.message)
    await _apply(ctx.api, Plan([Patch(target, ops)]), namespace, name, dry_run)
    return web.Response(status=202)


async def _memory_dump(
    ctx: SubresourceContext, request: web.Request, namespace: str, name: str
) -> web.StreamResponse:
    """memorydump: ask for a dump of the VM's memory into a claim (upstream's checks, in
    its order), by patching only the VM's status.memoryDumpRequest; virt-controller and
    virt-handler do the rest."""
    if not request.body_exists:
        raise StatusError(400, NO_DUMP_BODY)
    parsed = parse_memory_dump(await _body(request))
    if isinstance(parsed, Invalid):
        raise StatusError(400, parsed.message)
    vm = await _get(ctx.api, VIRTUAL_MACHINES, namespace, name, "the VirtualMachine")
    if vm is None:
        raise StatusError(404, f'virtualmachines.kubevirt.io "{name}" not found')
    claim = choose_claim(vm, parsed)
    if isinstance(claim, Invalid):
        raise StatusError(400, claim.message)
    if isinstance(claim, Conflict):
        raise StatusError(409, claim.message)
    vmi = await _get(
        ctx.api, VIRTUAL_MACHINE_INSTANCES, namespace, name, "the VirtualMachineInstance"
    )
    if vmi is None:
        raise StatusError(404, f'virtualmachineinstances.kubevirt.io "{name}" not found')
    if (vmi.get("status") or {}).get("phase") != Phase.RUNNING:
        raise StatusError(409, VMI_NOT_RUNNING)
    pvc = await _get(ctx.api, PERSISTENT_VOLUME_CLAIMS, namespace, claim, "the claim")
    if pvc is None:
        raise StatusError(404, f'persistentvolumeclaims "{claim}" not found')
    try:
        refusal = check_claim(pvc, vmi)
    except ValueError as error:
        raise StatusError(500, str(error)) from error
    if refusal is not None:
        raise StatusError(409, refusal.message)
    ops = plan_memory_dump(vm, claim)
    if isinstance(ops, Conflict):
        raise StatusError(409, ops.message)
    await _apply(ctx.api, Plan([Patch("vm-status", ops)]), namespace, name, False)
    return web.Response(status=202)


async def _remove_memory_dump(
    ctx: SubresourceContext, request: web.Request, namespace: str, name: str
) -> web.StreamResponse:
    """removememorydump: dissociate the VM's memory-dump claim (no body: nothing to ask)."""
    vm = await _get(ctx.api, VIRTUAL_MACHINES, namespace, name, "the VirtualMachine")
    if vm is None:
        raise StatusError(404, f'virtualmachines.kubevirt.io "{name}" not found')
    ops = plan_remove_memory_dump(vm)
    if isinstance(ops, Conflict):
        raise StatusError(409, ops.message)
    await _apply(ctx.api, Plan([Patch("vm-status", ops)]), namespace, name, False)
    return web.Response(status=202)


async def _expand(
    ctx: SubresourceContext, vm: Mapping[str, Any], failure_status: int
) -> Mapping[str, Any]:
    """The VM with its instancetype and preference folded in (upstream's Expand); a failure
    answers `failure_status` (400 for a VM in the body, 500 for a stored one, as upstream)."""
    try:
        return await expand(ctx.api, vm, DefaultsConfig())
    except (LookupError, ValueError) as error:
        raise StatusError(failure_status, str(error)) from error
    except ApiError as error:
        raise StatusError(500, f"reading the instancetype: {error.message}") from error


async def _expand_spec(
    ctx: SubresourceContext, request: web.Request, namespace: str, name: str
) -> web.StreamResponse:
    vm = await _get(ctx.api, VIRTUAL_MACHINES, namespace, name, "the VirtualMachine")
    if vm is None:
        raise StatusError(404, f'virtualmachines.kubevirt.io "{name}" not found')
    return web.json_response(await _expand(ctx, vm, 500))


async def _expand_vm_spec(
    ctx: SubresourceContext, request: web.Request, namespace: str
) -> web.StreamResponse:
    body = await _body(request)
    if body.get("kind") != "VirtualMachine":
        raise StatusError(400, "the body must be a VirtualMachine")
    meta = body.get("metadata")
    if isinstance(meta, Mapping) and meta.get("namespace") not in (None, "", namespace):
        raise StatusError(400, f"VM namespace must be empty or {namespace}")
    vm = {
        **body,
        "metadata": {**(meta if isinstance(meta, Mapping) else {}), "namespace": namespace},
    }
    return web.json_response(await _expand(ctx, vm, 400))


async def _object_graph(
    ctx: SubresourceContext, request: web.Request, namespace: str, name: str
) -> web.StreamResponse:
    """The VM's or VMI's object graph (feature gate ObjectGraph, as upstream)."""
    if not (await ctx.cluster_config()).gate("ObjectGraph"):
        raise StatusError(
            400, "ObjectGraph feature gate not enabled: Unable to return object graph."
        )
    vmi_asked = request.match_info["resource"] == "virtualmachineinstances"
    resource = VIRTUAL_MACHINE_INSTANCES if vmi_asked else VIRTUAL_MACHINES
    found = await _get(ctx.api, resource, namespace, name, f"the {resource.kind}")
    if found is None:
        raise StatusError(404, f'{resource.plural}.kubevirt.io "{name}" not found')
    try:
        include, labels = graph_options(await _body(request))
    except GraphOptionsError as error:
        raise StatusError(400, str(error)) from error
    try:
        pods = await ctx.api.list(PODS, namespace, label_selector="kubevirt.io=virt-launcher")
    except ApiError as error:
        raise StatusError(500, f"listing launcher pods: {error.message}") from error
    items = [p for p in (pods.get("items") or []) if isinstance(p, Mapping)]
    pod = launcher_pod_name(name, items)
    graph = vmi_graph(found, pod) if vmi_asked else vm_graph(found, pod)
    return web.json_response(filter_graph(graph, include, labels))


def _conditions(vmi: Mapping[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for condition in (vmi.get("status") or {}).get("conditions") or []:
        if isinstance(condition, Mapping) and isinstance(condition.get("type"), str):
            out[condition["type"]] = str(condition.get("status"))
    return out


def _check_vmi_action(action: str, vmi: Mapping[str, Any]) -> None:
    """Refuse commands that cannot apply to the VMI's state (as upstream)."""
    phase = (vmi.get("status") or {}).get("phase")
    conditions = _conditions(vmi)
    if action != "reset" and phase != Phase.RUNNING:
        raise StatusError(409, VMI_NOT_RUNNING)
    if action == "pause":
        if (vmi.get("spec") or {}).get("livenessProbe"):
            raise StatusError(403, "pausing a VMI with a livenessProbe is not supported")
        if "Paused" in conditions:
            raise StatusError(409, "VMI is already paused")
    if action == "unpause" and "Paused" not in conditions:
        raise StatusError(409, "VMI is not paused")
    if action == "softreboot" and conditions.get("Paused") == "True":
        raise StatusError(409, "VMI is paused")
    needs_agent = action in AGENT_REPORTS or action == "freeze"
    if needs_agent and conditions.get("AgentConnected") != "True":
        raise StatusError(409, NO_AGENT)


def _unfreeze_timeout(request: web.Request, body: Mapping[str, Any]) -> None:
    """upstream's checks of freeze's v1.FreezeUnfreezeTimeout body (400s with its words)."""
    if not request.body_exists:
        raise StatusError(400, "Request with no body: unfreeze timeout is required")
    value = body.get("unfreezeTimeout")
    if value is None:
        raise StatusError(400, "Unfreeze timeout must be provided")
    try:
        seconds = parse_duration(value) if isinstance(value, str) else None
    except DurationError as error:
        raise StatusError(
            400, f"Can not unmarshal Request body to struct, error: {error}"
        ) from error
    if seconds is None:
        raise StatusError(400, "Can not unmarshal Request body to struct: unfreezeTimeout")
    if seconds < 0:
        raise StatusError(400, "Unfreeze timeout must be positive")


async def _relay(
    ctx: SubresourceContext, request: web.Request, namespace: str, name: str, action: str
) -> web.StreamResponse:
    body = await _body(request) if request.method == "PUT" else {}
    dry_run = _dry_run(body) if action in ("pause", "unpause") else False
    vmi = await _get(
        ctx.api, VIRTUAL_MACHINE_INSTANCES, namespace, name, "the VirtualMachineInstance"
    )
    if vmi is None:
        raise StatusError(404, f'virtualmachineinstances.kubevirt.io "{name}" not found')
    _check_vmi_action(action, vmi)
    if action == "freeze":
        _unfreeze_timeout(request, body)
    try:
        if action in AGENT_REPORTS:
            return web.json_response(dict(await ctx.handlers.agent_report(vmi, action)))
        if action == SCREENSHOT:
            move = request.query.get("moveCursor", "false")
            if move not in ("true", "false"):
                raise StatusError(400, "moveCursor must be true or false")
            png = await ctx.handlers.screenshot(vmi, move == "true")
            return web.Response(body=png, content_type="image/png")
        if action in ("console", "vnc"):
            return await _stream(ctx, request, vmi, action)
        if not dry_run:
            options = {k: v for k, v in body.items() if k != "dryRun"}
            await ctx.handlers.command(vmi, action, options)
    except HandlerError as error:
        raise StatusError(
            error.status if 400 <= error.status < 600 else 502, error.message
        ) from error
    return web.Response(status=202)


def _forwarded_port(request: web.Request) -> tuple[int, str]:
    """The port and protocol of a portforward path (upstream: tcp unless given)."""
    port_text = request.match_info["port"]
    protocol = request.match_info.get("protocol") or "tcp"
    port = int(port_text) if port_text.isdigit() and len(port_text) <= 5 else 0
    if not 1 <= port <= 65535:
        raise StatusError(400, f"port {port_text!r} is not a port number (1-65535)")
    if protocol not in PORT_FORWARD_PROTOCOLS:
        raise StatusError(
            400,
            f"protocol {protocol!r} is not supported; use {' or '.join(PORT_FORWARD_PROTOCOLS)}",
        )
    return port, protocol


async def _port_forward(
    ctx: SubresourceContext, request: web.Request, namespace: str, name: str
) -> web.StreamResponse:
    """A VMI's (or a VM's VMI's) guest port, relayed through the handler on its node."""
    port, protocol = _forwarded_port(request)
    vmi = await _get(
        ctx.api, VIRTUAL_MACHINE_INSTANCES, namespace, name, "the VirtualMachineInstance"
    )
    if vmi is None:
        if request.match_info["resource"] == "virtualmachines":
            raise StatusError(409, f"VirtualMachine {name} is not running")
        raise StatusError(404, f'virtualmachineinstances.kubevirt.io "{name}" not found')
    if (vmi.get("status") or {}).get("phase") != Phase.RUNNING:
        raise StatusError(409, VMI_NOT_RUNNING)
    if _conditions(vmi).get("Paused") == "True":
        raise StatusError(409, "VMI is paused")
    try:
        return await _stream(ctx, request, vmi, f"{PORT_FORWARD}/{port}/{protocol}")
    except HandlerError as error:
        raise StatusError(
            error.status if 400 <= error.status < 600 else 502, error.message
        ) from error


async def _stream(
    ctx: SubresourceContext, request: web.Request, vmi: Mapping[str, Any], kind: str
) -> web.StreamResponse:
    """Join the client's websocket to the handler's, both ways, until either side closes."""
    upstream = await ctx.handlers.open_stream(vmi, kind)
    client = web.WebSocketResponse(protocols=("plain.kubevirt.io", "binary.kubevirt.io"))
    try:
        await client.prepare(request)
    except BaseException:
        # Not a websocket upgrade (a 400), or the client left: close the handler's stream,
        # which nothing else would.
        await upstream.close()
        raise

    async def pump(
        source: web.WebSocketResponse | aiohttp.ClientWebSocketResponse,
        sink: web.WebSocketResponse | aiohttp.ClientWebSocketResponse,
    ) -> None:
        while True:
            message = await source.receive()
            if message.type == aiohttp.WSMsgType.BINARY:
                await sink.send_bytes(message.data)
            elif message.type == aiohttp.WSMsgType.TEXT:
                await sink.send_str(message.data)
            else:
                break
        if source is upstream and message.type == aiohttp.WSMsgType.CLOSE and message.data != 1000:
            # The handler's reason (e.g. the guest's port refused) reaches the user.
            reason = str(message.extra or "").encode()[:120]
            await client.close(code=int(message.data), message=reason)

    m = vmi.get("metadata") or {}
    try:
        with ctx.metrics.connection(kind, str(m.get("namespace", "")), str(m.get("name", ""))):
            await pump_until_either_ends(pump(client, upstream), pump(upstream, client))
    finally:
        await upstream.close()
        await client.close()
    return client


def api_resource_list(version: str) -> dict[str, Any]:
    """Discovery for one version of the group (served without authentication)."""
    resources = [
        {
            "name": f"virtualmachines/{a}",
            "singularName": "",
            "namespaced": True,
            "kind": "",
            "verbs": ["get"] if a in READ_ACTIONS else ["update"],
        }
        for a in VM_ACTIONS
    ] + [
        {
            "name": f"virtualmachineinstances/{a}",
            "singularName": "",
            "namespaced": True,
            "kind": "",
            "verbs": ["get"] if a in READ_ACTIONS else ["update"],
        }
        for a in VMI_ACTIONS
    ]
    resources += [
        {
            "name": f"{resource}/{PORT_FORWARD}",
            "singularName": "",
            "namespaced": True,
            "kind": "",
            "verbs": ["get"],
        }
        for resource in ("virtualmachines", "virtualmachineinstances")
    ]
    resources += [
        {
            "name": f"{resource}/{EVACUATE_CANCEL}",
            "singularName": "",
            "namespaced": True,
            "kind": "",
            "verbs": ["update"],
        }
        for resource in ("virtualmachines", "virtualmachineinstances")
    ]
    resources.append(
        {
            "name": "expand-vm-spec",
            "singularName": "",
            "namespaced": True,
            "kind": "",
            "verbs": ["update"],
        }
    )
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{GROUP}/{version}",
        "resources": resources,
    }


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _secured(
    ctx: SubresourceContext, serve: Callable[[web.Request, str, str], Awaitable[web.StreamResponse]]
) -> Handler:
    async def handle(request: web.Request) -> web.StreamResponse:
        info = request.match_info
        namespace = info["namespace"]
        name = info.get("name", "")
        resource = info.get("resource", "expand-vm-spec")
        action = info.get("action", "")
        try:
            who = identify(request, ctx.front_proxy)
        except UnauthenticatedError as error:
            return status_response(401, str(error))
        try:
            decision = await authorize(
                ctx.api,
                who,
                ResourceAttributes(
                    namespace=namespace,
                    verb=rbac_verb(request.method, bool(name)),
                    resource=resource,
                    subresource=action,
                    name=name,
                    version=info.get("version", "v1"),
                ),
            )
        except (ApiError, aiohttp.ClientError, TimeoutError) as error:
            log.warning("SubjectAccessReview failed", error=str(error))
            return status_response(500, "could not authorize the request")
        if not decision.allowed:
            what = f"{resource}/{action}" if action else resource
            reason = f": {decision.reason}" if decision.reason else ""
            return status_response(
                403,
                f'User "{who.user}" cannot {rbac_verb(request.method, bool(name))} resource "{what}" in API group '
                f'"{GROUP}" in the namespace "{namespace}"{reason}',
            )
        try:
            return await serve(request, namespace, name)
        except StatusError as error:
            return status_response(error.code, error.message)
        except (ApiError, aiohttp.ClientError, TimeoutError) as error:
            log.warning("subresource call failed", error=str(error))
            return status_response(500, f"the API server could not be reached: {error}")

    return handle


def _vm_route(ctx: SubresourceContext, func: VmServe) -> Handler:
    async def serve(request: web.Request, namespace: str, name: str) -> web.StreamResponse:
        return await func(ctx, request, namespace, name)

    return _secured(ctx, serve)


def _vmi_route(ctx: SubresourceContext, action: str) -> Handler:
    async def serve(request: web.Request, namespace: str, name: str) -> web.StreamResponse:
        return await _relay(ctx, request, namespace, name, action)

    return _secured(ctx, serve)


def _expand_vm_spec_route(ctx: SubresourceContext) -> Handler:
    async def serve(request: web.Request, namespace: str, name: str) -> web.StreamResponse:
        return await _expand_vm_spec(ctx, request, namespace)

    return _secured(ctx, serve)


VmServe = Callable[[SubresourceContext, web.Request, str, str], Awaitable[web.StreamResponse]]


def add_subresource_routes(app: web.Application, ctx: SubresourceContext) -> None:
    """Route every subresource (both served versions) to its handler."""
    vm_handlers: dict[str, VmServe] = {
        "start": _start,
        "stop": _stop,
        "restart": _restart,
        "migrate": _migrate,
        MEMORY_DUMP: _memory_dump,
        REMOVE_MEMORY_DUMP: _remove_memory_dump,
    }
    for version in VERSIONS:
        base = f"/apis/{GROUP}/{{version:{version}}}/namespaces/{{namespace}}"
        for action, func in vm_handlers.items():
            app.router.add_put(
                f"{base}/{{resource:virtualmachines}}/{{name}}/{{action:{action}}}",
                _vm_route(ctx, func),
            )
        app.router.add_get(
            f"{base}/{{resource:virtualmachines}}/{{name}}/{{action:expand-spec}}",
            _vm_route(ctx, _expand_spec),
        )
        app.router.add_put(f"{base}/expand-vm-spec", _expand_vm_spec_route(ctx))
        app.router.add_get(
            f"{base}/{{resource:virtualmachines|virtualmachineinstances}}/{{name}}"
            f"/{{action:{OBJECT_GRAPH}}}",
            _vm_route(ctx, _object_graph),
        )
        app.router.add_put(
            f"{base}/{{resource:virtualmachines|virtualmachineinstances}}/{{name}}"
            f"/{{action:{EVACUATE_CANCEL}}}",
            _vm_route(ctx, _evacuate_cancel),
        )
        app.router.add_put(
            f"{base}/{{resource:virtualmachines|virtualmachineinstances}}/{{name}}"
            f"/{{action:{ADD_VOLUME}|{REMOVE_VOLUME}}}",
            _vm_route(ctx, _volume),
        )
        for tail in ("{port}", "{port}/{protocol}"):
            app.router.add_get(
                f"{base}/{{resource:virtualmachines|virtualmachineinstances}}/{{name}}"
                f"/{{action:{PORT_FORWARD}}}/{tail}",
                _vm_route(ctx, _port_forward),
            )
        for action in VMI_ACTIONS:
            if action == OBJECT_GRAPH or action in VOLUME_ACTIONS:
                continue  # routed above, for VMs and VMIs alike
            route = f"{base}/{{resource:virtualmachineinstances}}/{{name}}/{{action:{action}}}"
            if action in READ_ACTIONS:
                app.router.add_get(route, _vmi_route(ctx, action))
            else:
                app.router.add_put(route, _vmi_route(ctx, action))
