"""`virtctl soft-reboot`: reboot a VMI's guest through its agent or ACPI."""

from __future__ import annotations

import argparse
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
    """Add ``soft-reboot`` to ``subparsers``."""
    parser = subparsers.add_parser("soft-reboot", help="soft-reboot a virtual machine instance")
    parser.add_argument("name", metavar="VMI", help="the VirtualMachineInstance to reboot")
    add_cluster_flags(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Ask virt-api to soft-reboot the VMI; exit 1 with the server's reason on failure."""
    try:
        call(cluster_from_args(args), "PUT", "virtualmachineinstances", args.name, "softreboot", {})
    except SubresourceError as error:
        print(f"virtctl: error soft-rebooting VMI {args.name}: {error}", file=sys.stderr)
        return 1
    print(f"VMI {args.name} was scheduled to soft reboot")
    return 0
