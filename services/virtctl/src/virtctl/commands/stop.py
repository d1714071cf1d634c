"""`virtctl stop`: stop a VirtualMachine through the aggregated API."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from virtctl.commands.graceful import add_force_flags, forced_grace_period
from virtctl.commands.subresource import (
    SubresourceError,
    add_cluster_flags,
    call,
    cluster_from_args,
    dry_run_body,
)

__all__ = ["register", "run"]


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add ``stop`` to ``subparsers``."""
    parser = subparsers.add_parser("stop", help="stop a virtual machine")
    parser.add_argument("name", metavar="VM", help="the VirtualMachine to stop")
    add_force_flags(parser, "stop")
    parser.add_argument(
        "--dry-run", action="store_true", help="show what would happen; change nothing"
    )
    add_cluster_flags(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Ask virt-api to stop the VM; exit 1 with the server's reason on failure."""
    body = dry_run_body(args)
    try:
        grace_period = forced_grace_period(args)
    except ValueError as error:
        print(f"virtctl: {error}", file=sys.stderr)
        return 2
    if grace_period is not None:
        body["gracePeriod"] = grace_period
    try:
        call(cluster_from_args(args), "PUT", "virtualmachines", args.name, "stop", body)
    except SubresourceError as error:
        print(f"virtctl: error stopping VirtualMachine {args.name}: {error}", file=sys.stderr)
        return 1
    suffix = " (dry run)" if args.dry_run else ""
    print(f"VM {args.name} was scheduled to stop{suffix}")
    return 0
