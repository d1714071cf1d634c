"""The Service `virtctl expose` creates for a VM, VMI or VMI replica set (upstream's rules).

The selector: a VMI's labels (without `kubevirt.io/nodeName`), a VM's template labels, a
replica set's `matchLabels` (one with `matchExpressions` is refused); none is an error.
Ports: `--port` (with `--target-port`, `--protocol`, `--port-name`), else the ports the
pod-network interface declares (`port-1`, `port-2`, ...).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["KINDS", "SERVICE_TYPES", "ExposeError", "ServiceOptions", "service_for"]

KINDS = {
    "vmi": "vmi",
    "vmis": "vmi",
    "virtualmachineinstance": "vmi",
    "virtualmachineinstances": "vmi",
    "vm": "vm",
    "vms": "vm",
    "virtualmachine": "vm",
    "virtualmachines": "vm",
    "vmirs": "vmirs",
    "vmirss": "vmirs",
    "virtualmachineinstancereplicaset": "vmirs",
    "virtualmachineinstancereplicasets": "vmirs",
}
SERVICE_TYPES = ("ClusterIP", "NodePort", "LoadBalancer")


class ExposeError(ValueError):
    """The object cannot be exposed as asked; the message says why."""


@dataclass(frozen=True, slots=True)
class ServiceOptions:
    """expose's flags."""

    name: str
    port: int = 0
    target_port: str = ""
    protocol: str = "TCP"
    service_type: str = "ClusterIP"
    port_name: str = ""
    cluster_ip: str = ""
    external_ip: str = ""
    load_balancer_ip: str = ""


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _pod_network_ports(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    pod = next((_map(n).get("name") for n in spec.get("networks") or () if "pod" in _map(n)), None)
    interfaces = _map(_map(spec.get("domain")).get("devices")).get("interfaces") or ()
    for iface in interfaces:
        if pod is not None and _map(iface).get("name") == pod:
            return [
                {
                    "name": f"port-{i}",
                    "protocol": str(_map(p).get("protocol") or "TCP").upper(),
                    "port": _map(p).get("port"),
                }
                for i, p in enumerate(_map(iface).get("ports") or (), start=1)
            ]
    return []


def _target_port(text: str) -> int | str:
    return int(text) if text.isdigit() else text


def service_for(kind: str, obj: Mapping[str, Any], options: ServiceOptions) -> dict[str, Any]:
    """The Service body for `obj` (a VMI, VM or VMIRS as read from the API server)."""
    if options.protocol not in ("TCP", "UDP"):
        raise ExposeError(f"unknown protocol: {options.protocol}")
    if options.service_type == "ExternalName":
        raise ExposeError(f"type: {options.service_type} not supported")
    if options.service_type not in SERVICE_TYPES:
        raise ExposeError(f"unknown service type: {options.service_type}")
    meta, spec = _map(obj.get("metadata")), _map(obj.get("spec"))
    if kind == "vmi":
        selector = {
            k: v for k, v in _map(meta.get("labels")).items() if k != "kubevirt.io/nodeName"
        }
        ports = _pod_network_ports(spec)
    elif kind == "vm":
        template = _map(spec.get("template"))
        selector = dict(_map(_map(template.get("metadata")).get("labels")))
        ports = _pod_network_ports(_map(template.get("spec")))
    else:
        match = _map(spec.get("selector"))
        if match.get("matchExpressions"):
            raise ExposeError(
                "cannot expose VirtualMachineInstance ReplicaSet with match expressions"
            )
        selector = dict(_map(match.get("matchLabels")))
        ports = _pod_network_ports(_map(_map(spec.get("template")).get("spec")))
    if not selector:
        raise ExposeError(f"missing label information for {kind}: {meta.get('name')}")
    if options.port:
        port: dict[str, Any] = {"protocol": options.protocol, "port": options.port}
        if options.port_name:
            port["name"] = options.port_name
        if options.target_port:
            port["targetPort"] = _target_port(options.target_port)
        ports = [port]
    elif not ports:
        raise ExposeError("couldn't find port via --port flag or introspection")
    service_spec: dict[str, Any] = {
        "ports": ports,
        "selector": selector,
        "type": options.service_type,
    }
    if options.cluster_ip:
        service_spec["clusterIP"] = options.cluster_ip
    if options.load_balancer_ip:
        service_spec["loadBalancerIP"] = options.load_balancer_ip
    if options.external_ip:
        service_spec["externalIPs"] = [options.external_ip]
    metadata = {"name": options.name}
    if meta.get("namespace"):
        metadata["namespace"] = str(meta["namespace"])
    return {"apiVersion": "v1", "kind": "Service", "metadata": metadata, "spec": service_spec}
