"""`virtctl migrate`: live-migrate a running VirtualMachine to another node."""

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
    """Add ``migrate`` to ``subparsers``."""
    parser = subparsers.add_parser("migrate", help="migrate a virtual machine")
    parser.add_argument("name", metavar="VM", help="the VirtualMachine to migrate")
    parser.add_argument(
        "--addedNodeSelector",
        "--added-node-selector",
        dest="selector",
        action="append",
        default=[],
        metavar="KEY=VALUE[,KEY=VALUE...]",
        help="extra node selector for the target node: comma-separated, repeatable",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="show what would happen; change nothing"
    )
    add_cluster_flags(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Ask virt-api to create a migration; exit 1 with the server's reason on failure."""
    body = dry_run_body(args)
    selector: dict[str, str] = {}
    # As upstream's StringToString flag: "a=1,b=2", and the flag may repeat.
    items = [part for given in args.selector for part in given.split(",") if part]
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            print(
                f"virtctl: --addedNodeSelector {item!r} must look like KEY=VALUE", file=sys.stderr
            )
            return 2
        selector[key] = value
    if selector:
        body["addedNodeSelector"] = selector
    try:
        call(cluster_from_args(args), "PUT", "virtualmachines", args.name, "migrate", body)
    except SubresourceError as error:
        print(f"virtctl: error migrating VirtualMachine {args.name}: {error}", file=sys.stderr)
        return 1
    suffix = " (dry run)" if args.dry_run else ""
    print(f"VM {args.name} was scheduled to migrate{suffix}")
    return 0
