"""`virtctl unpause`: resume a paused VM or VMI."""

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
    """Add ``unpause`` to ``subparsers``."""
    parser = subparsers.add_parser("unpause", help="unpause a virtual machine (instance)")
    parser.add_argument("kind", choices=("vm", "vmi"), help="vm or vmi (a VM unpauses its VMI)")
    parser.add_argument("name", help="the VM or VMI name")
    parser.add_argument(
        "--dry-run", action="store_true", help="show what would happen; change nothing"
    )
    add_cluster_flags(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Ask virt-api to unpause the VMI; exit 1 with the server's reason on failure."""
    try:
        call(
            cluster_from_args(args),
            "PUT",
            "virtualmachineinstances",
            args.name,
            "unpause",
            dry_run_body(args),
        )
    except SubresourceError as error:
        print(f"virtctl: error unpausing VMI {args.name}: {error}", file=sys.stderr)
        return 1
    suffix = " (dry run)" if args.dry_run else ""
    print(f"VMI {args.name} was scheduled to unpause{suffix}")
    return 0
