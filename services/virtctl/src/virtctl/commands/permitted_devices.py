"""`virtctl permitted-devices`: the host devices and GPUs the KubeVirt CR permits VMIs.

As upstream: the first KubeVirt CR in the namespace (``-n``, else the context's), its
``permittedHostDevices`` PCI devices and mediated devices, printed in upstream's format.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Mapping
from typing import Any

from kube_runtime import ApiError
from kubevirt_api.resources import KUBEVIRTS

from virtctl.commands.subresource import (
    ClusterFlags,
    SubresourceError,
    add_cluster_flags,
    cluster_from_args,
    open_cluster,
)

__all__ = ["register", "render", "run"]


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add ``permitted-devices`` to ``subparsers``."""
    parser = subparsers.add_parser(
        "permitted-devices",
        help="list the host devices and GPUs the KubeVirt CR permits",
        epilog="example:\n  virtctl permitted-devices -n kubevirt",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_cluster_flags(parser)
    parser.set_defaults(run=run)


def _names(permitted: Mapping[str, Any], group: str) -> list[str]:
    devices = permitted.get(group) or []
    return [
        str(d["resourceName"]) for d in devices if isinstance(d, Mapping) and "resourceName" in d
    ]


def render(kubevirt: Mapping[str, Any]) -> str:
    """Upstream's text for one KubeVirt CR."""
    configuration = (kubevirt.get("spec") or {}).get("configuration") or {}
    permitted = configuration.get("permittedHostDevices") or {}
    hosts = ", ".join(_names(permitted, "pciHostDevices"))
    gpus = ", ".join(_names(permitted, "mediatedDevices"))
    return f"Permitted Devices: \nHost Devices: \n{hosts} \nGPU Devices: \n{gpus}\n"


async def _first_kubevirt(flags: ClusterFlags) -> Mapping[str, Any]:
    async with open_cluster(flags) as cluster:
        try:
            listing = await cluster.client.list(KUBEVIRTS, cluster.namespace)
        except ApiError as error:
            raise SubresourceError(error.message, error.status) from None
        items = [i for i in listing.get("items") or [] if isinstance(i, Mapping)]
        if not items:
            raise SubresourceError(f'no KubeVirt resource in "{cluster.namespace}" namespace')
        return items[0]


def run(args: argparse.Namespace) -> int:
    """Print the permitted devices; exit 1 when there is no KubeVirt CR to read."""
    try:
        kubevirt = asyncio.run(_first_kubevirt(cluster_from_args(args)))
    except SubresourceError as error:
        print(f"virtctl permitted-devices: {error}", file=sys.stderr)
        return 1
    sys.stdout.write(render(kubevirt))
    return 0
