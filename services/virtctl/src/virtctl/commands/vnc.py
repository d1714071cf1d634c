"""`virtctl vnc VMI --proxy-only`: a local TCP port that speaks the VMI's VNC.

Each connection to the port opens the VMI's `vnc` subresource and relays bytes both
ways; point any VNC viewer at the printed address. Only `--proxy-only` is offered (no
viewer is launched).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from virtctl.commands.subresource import (
    Cluster,
    SubresourceError,
    add_cluster_flags,
    cluster_from_args,
    open_cluster,
)
from virtctl.portforwarding import forward_connection

__all__ = ["register", "relay_connection", "run"]


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add ``vnc`` to ``subparsers``."""
    parser = subparsers.add_parser("vnc", help="proxy a VMI's VNC display to a local port")
    parser.add_argument("name", help="the VMI name")
    parser.add_argument(
        "--proxy-only", action="store_true", required=True, help="only run the local proxy"
    )
    parser.add_argument("--port", type=int, default=0, help="local port (0: any free one)")
    parser.add_argument("--address", default="127.0.0.1", help="local address to listen on")
    add_cluster_flags(parser)
    parser.set_defaults(run=run)


async def relay_connection(
    cluster: Cluster, name: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    """Relay one viewer connection; returns (never raises) when either side ends it."""
    await forward_connection(
        cluster,
        "virtualmachineinstances",
        name,
        "vnc",
        reader,
        writer,
        f"vnc of VMI {name}",
        protocols=("binary.kubevirt.io",),
    )


async def _serve(args: argparse.Namespace) -> None:
    # One client for all viewers: the kubeconfig (and any exec plugin) is read once.
    async with open_cluster(cluster_from_args(args)) as cluster:

        async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await relay_connection(cluster, args.name, reader, writer)

        server = await asyncio.start_server(connection, args.address, args.port)
        port = server.sockets[0].getsockname()[1]
        print(json.dumps({"port": port}), flush=True)
        async with server:
            await server.serve_forever()


def run(args: argparse.Namespace) -> int:
    """Serve until interrupted."""
    if not 0 <= args.port <= 65535:
        print("virtctl: --port: must be within 0..65535", file=sys.stderr)
        return 2
    try:
        asyncio.run(_serve(args))
    except SubresourceError as error:
        print(f"virtctl: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    except OSError as error:
        print(f"virtctl: cannot listen on {args.address}:{args.port}: {error}", file=sys.stderr)
        return 1
    return 0
