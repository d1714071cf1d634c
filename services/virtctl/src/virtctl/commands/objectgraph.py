"""`virtctl objectgraph (VM|--vmi VMI)`: the objects a VM or VMI owns or uses.

virt-api's ``objectgraph`` subresource answers (feature gate ObjectGraph, as upstream);
this prints the tree as JSON (default) or YAML.
"""

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

__all__ = ["register", "run", "selector_labels"]


def selector_labels(text: str) -> dict[str, str]:
    """`k=v,k2=v2` as a map (the last value of a repeated key wins, as upstream's flag)."""
    labels: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise argparse.ArgumentTypeError(f"{item!r} is not KEY=VALUE")
        labels[key] = value
    return labels


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add ``objectgraph`` to ``subparsers``."""
    parser = subparsers.add_parser(
        "objectgraph",
        help="show the objects a VM or VMI owns or uses (its dependency graph)",
        epilog="examples:\n"
        "  virtctl objectgraph my-vm\n"
        "  virtctl objectgraph --vmi my-vmi\n"
        "  virtctl objectgraph my-vm --exclude-optional\n"
        '  virtctl objectgraph my-vm --selector="kubevirt.io/dependency-type=storage"\n'
        "  virtctl objectgraph my-vm --output yaml",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("name", metavar="VM|VMI")
    parser.add_argument("--vmi", action="store_true", help="the graph of the VMI, not the VM")
    parser.add_argument("--exclude-optional", action="store_true", help="leave out optional nodes")
    parser.add_argument(
        "--selector",
        type=selector_labels,
        default={},
        metavar="K=V[,K=V]",
        help="only nodes with these labels (e.g. kubevirt.io/dependency-type=storage)",
    )
    parser.add_argument("-o", "--output", choices=("json", "yaml"), default="json")
    add_cluster_flags(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Print the graph; exit 1 with the server's reason on failure."""
    options: dict[str, Any] = {"includeOptionalNodes": not args.exclude_optional}
    if args.selector:
        options["labelSelector"] = {"matchLabels": args.selector}
    resource = "virtualmachineinstances" if args.vmi else "virtualmachines"
    kind = "VirtualMachineInstance" if args.vmi else "VirtualMachine"
    try:
        graph = call(cluster_from_args(args), "GET", resource, args.name, "objectgraph", options)
    except SubresourceError as error:
        print(
            f"virtctl: error listing object graph of {kind} {args.name}: {error}",
            file=sys.stderr,
        )
        return 1
    if args.output == "yaml":
        sys.stdout.write(yaml.safe_dump(graph, sort_keys=False))
    else:
        print(json.dumps(graph, indent=2))
    return 0
