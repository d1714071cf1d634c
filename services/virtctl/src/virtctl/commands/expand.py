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
from virtctl.documents import Document, ReadError, read_documents

__all__ = ["register", "run"]


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add ``expand`` to ``subparsers``."""
    parser = subparsers.add_parser("expand", help="expand a VM's instancetype and preference")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--vm", help="the VirtualMachine (in the cluster) to expand")
    source.add_argument("-f", "--file", help="a VirtualMachine manifest to expand ('-' for stdin)")
    parser.add_argument("-o", "--output", choices=("yaml", "json"), default="yaml")
    add_cluster_flags(parser)
    parser.set_defaults(run=run)


def _read_vm(source: str) -> dict[str, Any]:
    """The one VirtualMachine in `source` (a path or '-')."""
    # The manifest reader keeps timestamps as strings (a datetime is not JSON) and turns
    # unreadable or non-UTF-8 input into a message naming the source.
    docs = list(read_documents([source]))
    for doc in docs:
        if isinstance(doc, ReadError):
            raise SubresourceError(str(doc))
    data = docs[0].data if len(docs) == 1 and isinstance(docs[0], Document) else None
    if not isinstance(data, dict) or data.get("kind") != "VirtualMachine":
        raise SubresourceError(f"{source} must hold one VirtualMachine")
    return data


def run(args: argparse.Namespace) -> int:
    """Print the expanded VM; exit 1 with the server's reason on failure."""
    what = args.vm or args.file
    try:
        if args.file:
            vm = _read_vm(args.file)
            expanded = call(cluster_from_args(args), "PUT", "", "", "expand-vm-spec", vm)
        else:
            expanded = call(
                cluster_from_args(args), "GET", "virtualmachines", args.vm, "expand-spec"
            )
    except SubresourceError as error:
        print(f"virtctl: error expanding VirtualMachine {what}: {error}", file=sys.stderr)
        return 1
    if args.output == "json":
        print(json.dumps(expanded, indent=2))
    else:
        print(yaml.safe_dump(expanded, sort_keys=False), end="")
    return 0
