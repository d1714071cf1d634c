"""`virtctl guestosinfo`: print the guest OS information its agent reports."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from virtctl.commands.subresource import (
    SubresourceError,
    add_cluster_flags,
    call,
    cluster_from_args,
)

__all__ = ["register", "run"]


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add ``guestosinfo`` to ``subparsers``."""
    parser = subparsers.add_parser("guestosinfo", help="show guest OS info (needs the guest agent)")
    parser.add_argument("name", metavar="VMI", help="the VirtualMachineInstance")
    add_cluster_flags(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Print the guest agent's OS info as JSON; exit 1 with the server's reason on failure."""
    try:
        info = call(
            cluster_from_args(args), "GET", "virtualmachineinstances", args.name, "guestosinfo"
        )
    except SubresourceError as error:
        print(f"virtctl: error getting guest OS info of VMI {args.name}: {error}", file=sys.stderr)
        return 1
    print(json.dumps(info, indent=2))
    return 0
