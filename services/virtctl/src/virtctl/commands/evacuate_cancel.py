"""`virtctl evacuate-cancel (vm|vmi) NAME`: stop the evacuation of a VM's VMI (clear the
status.evacuationNodeName an eviction set), through virt-api's evacuate/cancel."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from kube_runtime import VIRTUAL_MACHINE_INSTANCES, ApiError

from virtctl.commands.subresource import (
    ClusterFlags,
    SubresourceError,
    add_cluster_flags,
    cluster_from_args,
    dry_run_body,
    open_cluster,
)

__all__ = ["register", "run"]

_KINDS = {
    "vm": ("VM", "virtualmachines"),
    "vms": ("VM", "virtualmachines"),
    "virtualmachine": ("VM", "virtualmachines"),
    "virtualmachines": ("VM", "virtualmachines"),
    "vmi": ("VMI", "virtualmachineinstances"),
    "vmis": ("VMI", "virtualmachineinstances"),
    "virtualmachineinstance": ("VMI", "virtualmachineinstances"),
    "virtualmachineinstances": ("VMI", "virtualmachineinstances"),
}


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add ``evacuate-cancel`` to ``subparsers``."""
    parser = subparsers.add_parser("evacuate-cancel", help="cancel evacuation for a VM or VMI")
    parser.add_argument("kind", help="vm or vmi")
    parser.add_argument("name", help="the VM or VMI name")
    parser.add_argument(
        "--dry-run", action="store_true", help="show what would happen; change nothing"
    )
    add_cluster_flags(parser)
    parser.set_defaults(run=run)


async def _cancel(
    flags: ClusterFlags, label: str, resource: str, name: str, body: dict[str, Any]
) -> str:
    async with open_cluster(flags) as cluster:
        try:
            vmi = await cluster.client.get(VIRTUAL_MACHINE_INSTANCES, name, cluster.namespace)
        except ApiError as error:
            raise SubresourceError(
                f"error retrieving VMI for evacuation cancel for {label} "
                f"{cluster.namespace}/{name}: {error}"
            ) from None
        node = (vmi.get("status") or {}).get("nodeName")
        if not node:
            raise SubresourceError(f"{label} {cluster.namespace}/{name} doesn't report Node name")
        try:
            await cluster.request(
                "PUT",
                cluster.path(resource, name, "evacuate/cancel"),
                {**body, "evacuationNodeName": node},
            )
        except SubresourceError as error:
            raise SubresourceError(
                f"error canceling evacuation for {label} {cluster.namespace}/{name}: {error}"
            ) from None
        return cluster.namespace


def run(args: argparse.Namespace) -> int:
    """Exit 1 with the reason when the kind is unknown or the call fails."""
    kind = _KINDS.get(args.kind.lower())
    if kind is None:
        print(f'virtctl: unsupported resource type "{args.kind}"', file=sys.stderr)
        return 1
    label, resource = kind
    try:
        namespace = asyncio.run(
            _cancel(cluster_from_args(args), label, resource, args.name, dry_run_body(args))
        )
    except SubresourceError as error:
        print(f"virtctl: {error}", file=sys.stderr)
        return 1
    print(f"{label} {namespace}/{args.name} was canceled evacuation")
    return 0
