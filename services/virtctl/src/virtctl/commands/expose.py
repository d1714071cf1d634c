"""`virtctl expose (vm|vmi|vmirs) NAME --name SVC [--port N ...]`: a Service for it."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

import aiohttp
from kube_runtime import SERVICES, VIRTUAL_MACHINE_INSTANCES, VIRTUAL_MACHINES, ApiError
from kubevirt_api.resources import VIRTUAL_MACHINE_INSTANCE_REPLICASETS

from virtctl.commands.subresource import (
    SubresourceError,
    add_cluster_flags,
    cluster_from_args,
    open_cluster,
)
from virtctl.exposing import KINDS, ExposeError, ServiceOptions, service_for

__all__ = ["register", "run"]

_RESOURCES = {
    "vmi": (VIRTUAL_MACHINE_INSTANCES, "VirtualMachineInstance"),
    "vm": (VIRTUAL_MACHINES, "Virtual Machine"),
    "vmirs": (VIRTUAL_MACHINE_INSTANCE_REPLICASETS, "VirtualMachineInstance ReplicaSet"),
}


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add ``expose`` to ``subparsers``."""
    parser = subparsers.add_parser(
        "expose",
        help="expose a VM, VMI or VMI replica set as a new Service",
        description="Look up a VMI, VM or VMI replica set by name and use its labels as "
        "the selector of a new Service on the given port.",
    )
    parser.add_argument("kind", help="vmi, vm or vmirs (singular or plural, or the kind name)")
    parser.add_argument("object", metavar="NAME", help="its name")
    parser.add_argument("--name", required=True, help="name of the Service to create")
    parser.add_argument("--port", type=int, default=0, help="the port the Service serves on")
    parser.add_argument(
        "--target-port", default="", help="name or number of the guest's port (default: --port)"
    )
    parser.add_argument("--protocol", default="TCP", help="TCP (default) or UDP")
    parser.add_argument(
        "--type",
        dest="service_type",
        default="ClusterIP",
        help="ClusterIP, NodePort or LoadBalancer",
    )
    parser.add_argument("--port-name", default="", help="name of the port")
    parser.add_argument("--cluster-ip", default="", help="ClusterIP to assign ('None': headless)")
    parser.add_argument("--external-ip", default="", help="an additional external IP")
    parser.add_argument("--load-balancer-ip", default="", help="IP for the load balancer")
    add_cluster_flags(parser)
    parser.set_defaults(run=run)


async def _expose(args: argparse.Namespace, kind: str, options: ServiceOptions) -> None:
    resource, what = _RESOURCES[kind]
    async with open_cluster(cluster_from_args(args)) as cluster:
        try:
            obj = await cluster.client.get(resource, args.object, cluster.namespace)
        except ApiError as error:
            raise SubresourceError(f"error fetching {what}: {error.message}") from None
        service = service_for(kind, obj, options)
        try:
            await cluster.client.create(SERVICES, service, cluster.namespace)
        except ApiError as error:
            raise SubresourceError(f"service creation failed: {error.message}") from None


def run(args: argparse.Namespace) -> int:
    """Create the Service; exit 1 with the reason on failure."""
    kind = KINDS.get(args.kind.lower())
    if kind is None:
        print(f"virtctl: unsupported resource type: {args.kind}", file=sys.stderr)
        return 2
    if not 0 <= args.port <= 65535:
        print("virtctl: --port: must be within 1..65535", file=sys.stderr)
        return 2
    options = ServiceOptions(
        name=args.name,
        port=args.port,
        target_port=args.target_port,
        protocol=args.protocol,
        service_type=args.service_type,
        port_name=args.port_name,
        cluster_ip=args.cluster_ip,
        external_ip=args.external_ip,
        load_balancer_ip=args.load_balancer_ip,
    )
    try:
        asyncio.run(_expose(args, kind, options))
    except (SubresourceError, ExposeError) as error:
        print(f"virtctl: {error}", file=sys.stderr)
        return 1
    except (aiohttp.ClientError, OSError, TimeoutError) as error:
        print(f"virtctl: cannot reach the cluster: {error}", file=sys.stderr)
        return 1
    print(f"Service {args.name} successfully exposed for {args.kind} {args.object}")
    return 0
