"""`virtctl pause|unpause|soft-reboot|reset`: one PUT on a VMI subresource each.

The four commands differ only in their words, so they are one table (`ACTIONS`) and one
`run`; upstream's messages (`VMI <name> was scheduled to <verb>`) are kept, since scripts
read them.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Any

from virtctl.commands.subresource import (
    SubresourceError,
    add_cluster_flags,
    call,
    cluster_from_args,
    dry_run_body,
)

__all__ = ["ACTIONS", "VmiAction", "register", "run"]


@dataclass(frozen=True, slots=True)
class VmiAction:
    """One command: its name, the subresource it calls, and its words."""

    command: str
    subresource: str
    help: str
    #: "pausing" in "error pausing VMI x".
    doing: str
    #: "pause" in "VMI x was scheduled to pause".
    scheduled: str
    #: pause/unpause take `vm|vmi NAME` (a VM acts on its VMI) and --dry-run, as upstream.
    takes_kind: bool = False
    example: str = ""


ACTIONS: tuple[VmiAction, ...] = (
    VmiAction(
        "pause",
        "pause",
        "pause a virtual machine (instance): the guest stops executing",
        "pausing",
        "pause",
        takes_kind=True,
        example="virtctl pause vm myvm",
    ),
    VmiAction(
        "unpause",
        "unpause",
        "unpause a virtual machine (instance)",
        "unpausing",
        "unpause",
        takes_kind=True,
        example="virtctl unpause vmi myvmi",
    ),
    VmiAction(
        "soft-reboot",
        "softreboot",
        "soft-reboot a virtual machine instance (guest agent, else ACPI)",
        "soft-rebooting",
        "soft reboot",
        example="virtctl soft-reboot myvmi",
    ),
    VmiAction(
        "reset",
        "reset",
        "reset a virtual machine instance, like pressing its reset button",
        "resetting",
        "reset",
        example="virtctl reset myvmi",
    ),
)


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add every command of `ACTIONS` to ``subparsers``."""
    for action in ACTIONS:
        parser = subparsers.add_parser(
            action.command,
            help=action.help,
            description=action.help[0].upper() + action.help[1:] + ".",
            epilog=f"example:\n  {action.example}" if action.example else None,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        if action.takes_kind:
            parser.add_argument(
                "kind", choices=("vm", "vmi"), help="vm or vmi (a VM acts on its VMI)"
            )
            parser.add_argument("name", help="the VM or VMI name")
            parser.add_argument(
                "--dry-run", action="store_true", help="show what would happen; change nothing"
            )
        else:
            parser.add_argument("name", metavar="VMI", help="the VirtualMachineInstance")
        add_cluster_flags(parser)
        parser.set_defaults(run=run, vmi_action=action)


def run(args: argparse.Namespace) -> int:
    """Call the action's subresource; exit 1 with the server's reason on failure."""
    action: VmiAction = args.vmi_action
    body = dry_run_body(args) if action.takes_kind else {}
    try:
        call(
            cluster_from_args(args),
            "PUT",
            "virtualmachineinstances",
            args.name,
            action.subresource,
            body,
        )
    except SubresourceError as error:
        print(f"virtctl: error {action.doing} VMI {args.name}: {error}", file=sys.stderr)
        return 1
    suffix = " (dry run)" if getattr(args, "dry_run", False) else ""
    print(f"VMI {args.name} was scheduled to {action.scheduled}{suffix}")
    return 0
