"""`virtctl guestosinfo`, `userlist`, `fslist`: print what the VMI's guest agent reports.

Each prints the subresource's answer as indented JSON, as upstream's virtctl does:
guestosinfo (v1.VirtualMachineInstanceGuestAgentInfo), userlist
(v1.VirtualMachineInstanceGuestOSUserList), fslist (v1.VirtualMachineInstanceFileSystemList).
"""

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

__all__ = ["REPORTS", "register", "run"]

#: command -> (subresource, what the help and errors call it)
REPORTS = {
    "guestosinfo": ("guestosinfo", "guest OS info"),
    "userlist": ("userlist", "user list"),
    "fslist": ("filesystemlist", "filesystem list"),
}


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add ``guestosinfo``, ``userlist`` and ``fslist`` to ``subparsers``."""
    for command, (subresource, what) in REPORTS.items():
        parser = subparsers.add_parser(command, help=f"show the {what} (needs the guest agent)")
        parser.add_argument("name", metavar="VMI", help="the VirtualMachineInstance")
        add_cluster_flags(parser)
        parser.set_defaults(run=run, subresource=subresource, what=what)


def run(args: argparse.Namespace) -> int:
    """Print the report as JSON; exit 1 with the server's reason on failure."""
    try:
        report = call(
            cluster_from_args(args), "GET", "virtualmachineinstances", args.name, args.subresource
        )
    except SubresourceError as error:
        print(f"virtctl: error getting {args.what} of VMI {args.name}: {error}", file=sys.stderr)
        return 1
    print(json.dumps(report, indent=2))
    return 0
