"""`virtctl expand`: print a VM with its instancetype and preference expanded."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import yaml

from virtctl.commands.subresource import (
    SubresourceError,
    add_cluster_flags,
    call,
    cluster_from_args,
)

__all__ = ["register", "run"]


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add ``expand`` to ``subparsers``."""
    parser = subparsers.add_parser("expand", help="expand a VM's instancetype and preference")
    parser.add_argument("--vm", required=True, help="the VirtualMachine to expand")
    parser.add_argument("-o", "--output", choices=("yaml", "json"), default="yaml")
    add_cluster_flags(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Print the expanded VM; exit 1 with the server's reason on failure."""
    try:
        expanded = call(cluster_from_args(args), "GET", "virtualmachines", args.vm, "expand-spec")
    except SubresourceError as error:
        print(f"virtctl: error expanding VirtualMachine {args.vm}: {error}", file=sys.stderr)
        return 1
    if args.output == "json":
        print(json.dumps(expanded, indent=2))
    else:
        print(yaml.safe_dump(expanded, sort_keys=False), end="")
    return 0
