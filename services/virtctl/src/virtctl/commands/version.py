"""`virtctl version`: the client's version, and virt-api's (upstream's `-c` skips the server)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Mapping
from typing import Any

from virtctl.commands.subresource import (
    GROUP_PATH,
    ClusterFlags,
    SubresourceError,
    add_cluster_flags,
    cluster_from_args,
    open_cluster,
)
from virtctl.version import client_version_info

__all__ = ["register", "run"]


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add ``version`` to ``subparsers``."""
    parser = subparsers.add_parser(
        "version",
        help="print the client and server version",
        epilog="examples:\n  virtctl version\n  virtctl version -c   # no cluster needed",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "-c", "--client", action="store_true", help="client version only (no server required)"
    )
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text")
    add_cluster_flags(parser)
    parser.set_defaults(run=run)


async def _server_version(flags: ClusterFlags) -> Mapping[str, Any]:
    async with open_cluster(flags) as cluster:
        answer = await cluster.request("GET", f"{GROUP_PATH}/version", None)
    if not isinstance(answer, Mapping):
        raise SubresourceError("virt-api's version answer is not a JSON object")
    return answer


def _line(info: Mapping[str, Any]) -> str:
    details = [str(info[k]) for k in ("implementation", "platform") if info.get(k)]
    if info.get("pythonVersion"):
        details.append(f"Python {info['pythonVersion']}")
    return f"{info.get('gitVersion', '?')} ({', '.join(details)})"


def run(args: argparse.Namespace) -> int:
    """Print the versions; exit 1 when the server's cannot be read (0 with -c)."""
    client = client_version_info()
    server: Mapping[str, Any] | None = None
    failure = ""
    if not args.client:
        try:
            server = asyncio.run(_server_version(cluster_from_args(args)))
        except SubresourceError as error:
            failure = str(error)
    if args.output == "json":
        out: dict[str, Any] = {"clientVersion": client}
        if server is not None:
            out["serverVersion"] = dict(server)
        print(json.dumps(out, indent=2))
    else:
        print(f"Client Version: {_line(client)}")
        if server is not None:
            print(f"Server Version: {_line(server)}")
    if failure:
        print(f"virtctl: error getting the server version: {failure}", file=sys.stderr)
        return 1
    return 0
