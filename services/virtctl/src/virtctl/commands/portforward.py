"""`virtctl port-forward TARGET [protocol/]local[:remote]...`: guest ports on local ones.

TARGET is `vmi/NAME[/NAMESPACE]` or `vm/NAME[/NAMESPACE]` (upstream's forms). Each local
connection opens the `portforward` subresource (virt-api → virt-handler → the pod).
`--stdio` joins one port to stdin/stdout instead, for ssh's ProxyCommand; messages then
go to stderr only.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
from typing import Any

from virtctl.commands.subresource import (
    SubresourceError,
    add_cluster_flags,
    cluster_from_args,
    open_cluster,
)
from virtctl.portforwarding import forward_stdio, serve_ports
from virtctl.targets import TargetError, parse_port, parse_target

__all__ = ["register", "run"]


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add ``port-forward`` to ``subparsers``."""
    parser = subparsers.add_parser(
        "port-forward",
        help="forward local ports to a virtual machine (instance)",
        description="Forward local ports to a VM or VMI over the Kubernetes API "
        "(type/name[/namespace] [protocol/]localPort[:targetPort]...; protocol tcp or udp).",
    )
    parser.add_argument("target", help="vmi/NAME[/NAMESPACE] or vm/NAME[/NAMESPACE]")
    parser.add_argument("ports", nargs="+", help="[tcp|udp/]LOCAL[:REMOTE]")
    parser.add_argument(
        "--stdio",
        action="store_true",
        help="forward one port to stdin/stdout (for ssh's ProxyCommand); also --stdio=true",
    )
    parser.add_argument("--address", default="127.0.0.1", help="local address to listen on")
    add_cluster_flags(parser)
    parser.set_defaults(run=run)


async def _forward(args: argparse.Namespace) -> None:
    target = parse_target(args.target)
    ports = [parse_port(p) for p in args.ports]
    async with open_cluster(cluster_from_args(args)) as cluster:
        if target.namespace:
            cluster = dataclasses.replace(cluster, namespace=target.namespace)
        if args.stdio:
            await forward_stdio(cluster, target, ports[0])
        else:
            await serve_ports(cluster, target, ports, args.address)


def run(args: argparse.Namespace) -> int:
    """Forward until interrupted (or, with --stdio, until the stream ends)."""
    try:
        target = parse_target(args.target)
        ports = [parse_port(p) for p in args.ports]
    except TargetError as error:
        print(f"virtctl: port-forward: {error}", file=sys.stderr)
        return 2
    if args.stdio and len(ports) != 1:
        print("virtctl: only one port supported when forwarding to stdout", file=sys.stderr)
        return 2
    try:
        asyncio.run(_forward(args))
    except SubresourceError as error:
        print(f"virtctl: can't access {target.kind}/{target.name}: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    except OSError as error:
        print(f"virtctl: cannot listen on {args.address}: {error}", file=sys.stderr)
        return 1
    return 0
