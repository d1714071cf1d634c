"""`virtctl vmexport create|delete|download`: VirtualMachineExports, as upstream's.

vmexport create NAME (--pvc=X | --vm=X | --snapshot=X) [--ttl=DURATION]
vmexport delete NAME
vmexport download NAME --output=FILE [--volume=V] [--format=raw|gzip]
    [--port-forward [--local-port=N]] [--insecure] [--keep-vme]
    [--pvc=X | --vm=X | --snapshot=X  (create it first)] [--ttl=DURATION]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from kubevirt_api.durations import DurationError, parse_duration

from virtctl.commands.subresource import (
    ClusterFlags,
    SubresourceError,
    add_cluster_flags,
    cluster_from_args,
    open_cluster,
)
from virtctl.exporting import (
    ExportSource,
    create_export,
    delete_export,
    download,
    wait_ready,
)

__all__ = ["register", "run", "source_from_args"]

DEFAULT_READINESS_TIMEOUT = 120.0


def _source_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--pvc", metavar="NAME", help="export this PersistentVolumeClaim")
    group.add_argument(
        "--vm", metavar="NAME", help="export this (stopped) VirtualMachine's volumes"
    )
    group.add_argument("--snapshot", metavar="NAME", help="export this VirtualMachineSnapshot")
    parser.add_argument("--ttl", metavar="DURATION", help="how long the export lives (default 2h)")


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add ``vmexport`` and its three actions to ``subparsers``."""
    parser = subparsers.add_parser("vmexport", help="export a VM's or a PVC's volumes")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    create = actions.add_parser("create", help="create a VirtualMachineExport")
    create.add_argument("name", metavar="NAME")
    _source_flags(create)
    add_cluster_flags(create)

    delete = actions.add_parser("delete", help="delete a VirtualMachineExport")
    delete.add_argument("name", metavar="NAME")
    add_cluster_flags(delete)

    fetch = actions.add_parser("download", help="download a volume of a VirtualMachineExport")
    fetch.add_argument("name", metavar="NAME")
    fetch.add_argument("--output", required=True, metavar="FILE", help="where to write the volume")
    fetch.add_argument("--volume", metavar="NAME", help="which volume (needed when several)")
    fetch.add_argument("--format", choices=("raw", "gzip"), default="gzip")
    fetch.add_argument(
        "--port-forward",
        action="store_true",
        help="reach the exporter pod through the API server (else at its pod IP)",
    )
    fetch.add_argument("--local-port", type=int, default=0, help="with --port-forward")
    fetch.add_argument(
        "--insecure", action="store_true", help="do not verify the exporter's certificate"
    )
    fetch.add_argument("--keep-vme", action="store_true", help="keep the export after the download")
    fetch.add_argument(
        "--readiness-timeout",
        type=float,
        default=DEFAULT_READINESS_TIMEOUT,
        metavar="SECONDS",
        help="how long to wait for the export to be Ready",
    )
    _source_flags(fetch)
    add_cluster_flags(fetch)
    parser.set_defaults(run=run)


def source_from_args(args: argparse.Namespace) -> ExportSource | None:
    """--pvc / --vm / --snapshot, if one was given."""
    for flag, kind in (
        ("pvc", "PersistentVolumeClaim"),
        ("vm", "VirtualMachine"),
        ("snapshot", "VirtualMachineSnapshot"),
    ):
        value = getattr(args, flag, None)
        if value:
            return ExportSource(kind, value)
    return None


def _check_ttl(ttl: str | None) -> None:
    if ttl is not None:
        try:
            seconds = parse_duration(ttl)
        except DurationError as error:
            raise SubresourceError(f"--ttl: {error}") from None
        if seconds <= 0:
            raise SubresourceError(f"--ttl: {ttl!r} must be positive")


async def _create(flags: ClusterFlags, args: argparse.Namespace) -> str:
    source = source_from_args(args)
    if source is None:
        raise SubresourceError("create: one of --pvc, --vm or --snapshot is required")
    _check_ttl(args.ttl)
    async with open_cluster(flags) as cluster:
        await create_export(cluster, args.name, source, args.ttl)
    return f"VirtualMachineExport '{cluster.namespace}/{args.name}' created successfully"


async def _delete(flags: ClusterFlags, args: argparse.Namespace) -> str:
    async with open_cluster(flags) as cluster:
        found = await delete_export(cluster, args.name)
    if not found:
        return f"VirtualMachineExport '{cluster.namespace}/{args.name}' does not exist"
    return f"VirtualMachineExport '{cluster.namespace}/{args.name}' deleted successfully"


async def _download(flags: ClusterFlags, args: argparse.Namespace) -> str:
    source = source_from_args(args)
    _check_ttl(args.ttl)
    if not 0 <= args.local_port <= 65535:
        raise SubresourceError(f"--local-port: {args.local_port} is not a port number")
    async with open_cluster(flags) as cluster:
        if source is not None:
            await create_export(cluster, args.name, source, args.ttl)
        try:
            export = await wait_ready(cluster, args.name, args.readiness_timeout)
            result = await download(
                cluster,
                export,
                Path(args.output),
                volume=args.volume,
                fmt=args.format,
                insecure=args.insecure,
                use_port_forward=args.port_forward,
                local_port=args.local_port,
            )
        finally:
            if not args.keep_vme:
                await delete_export(cluster, args.name)
    return f"Downloaded {result.bytes} bytes of volume {result.volume} to {args.output}"


def run(args: argparse.Namespace) -> int:
    """One action; exit 1 with the reason on failure."""
    action = {"create": _create, "delete": _delete, "download": _download}[args.action]
    try:
        message = asyncio.run(action(cluster_from_args(args), args))
    except SubresourceError as error:
        print(f"virtctl: {error}", file=sys.stderr)
        return 1
    except OSError as error:
        print(f"virtctl: {error}", file=sys.stderr)
        return 1
    print(message)
    return 0
