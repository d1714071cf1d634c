"""`virtctl start`: start a VirtualMachine through the aggregated API."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from virtctl.commands.subresource import (
    SubresourceError,
    add_cluster_flags,
    call,
    cluster_from_args,
    dry_run_body,
)

__all__ = ["register", "run"]


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add ``start`` to ``subparsers``."""
    parser = subparsers.add_parser("start", help="start a virtual machine")
    parser.add_argument("name", metavar="VM", help="the VirtualMachine to start")
    parser.add_argument("--paused", action="store_true", help="start the VM paused")
    parser.add_argument(
        "--dry-run", action="store_true", help="show what would happen; change nothing"
    )
    add_cluster_flags(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Ask virt-api to start the VM; exit 1 with the server's reason on failure."""
    body = dry_run_body(args)
    if args.paused:
        body["paused"] = True
    try:
        call(cluster_from_args(args), "PUT", "virtualmachines", args.name, "start", body)
    except SubresourceError as error:
        print(f"virtctl: error starting VirtualMachine {args.name}: {error}", file=sys.stderr)
        return 1
    suffix = " (dry run)" if args.dry_run else ""
    print(f"VM {args.name} was scheduled to start{suffix}")
    return 0
