"""`virtctl scp [-r] SRC DST`: the system's scp, one side `[user@]vmi/NAME[/NS]:PATH`,
through `virtctl port-forward --stdio` as its ProxyCommand (see virtctl.sshing)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kube_runtime import KubeconfigError

from virtctl.commands.ssh import namespace_for, run_client
from virtctl.commands.subresource import add_cluster_flags
from virtctl.sshing import add_ssh_flags, scp_argv, scp_host, ssh_options_from_args
from virtctl.targets import TargetError, parse_scp_location

__all__ = ["register", "run"]


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add ``scp`` to ``subparsers``."""
    parser = subparsers.add_parser(
        "scp",
        help="copy files to or from a virtual machine (instance)",
        description="Run the system's scp between a local path and "
        "[user@]vmi/NAME[/NAMESPACE]:PATH (or vm/...), tunnelled through port-forward.",
    )
    parser.add_argument("source", help="a local path or [user@]vmi/NAME[/NAMESPACE]:PATH")
    parser.add_argument("destination", help="a local path or [user@]vmi/NAME[/NAMESPACE]:PATH")
    parser.add_argument("-r", "--recursive", action="store_true", help="copy directories")
    parser.add_argument("--preserve", action="store_true", help="keep modification times and modes")
    add_ssh_flags(parser)
    add_cluster_flags(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Exec scp and return its exit code."""
    try:
        source = parse_scp_location(args.source)
        destination = parse_scp_location(args.destination)
    except TargetError as error:
        print(f"virtctl: scp: {error}", file=sys.stderr)
        return 2
    if (source is None) == (destination is None):
        print(
            "virtctl: scp: exactly one of source and destination must be "
            "[user@]vmi/NAME[/NAMESPACE]:PATH (or vm/...)",
            file=sys.stderr,
        )
        return 2
    remote = source or destination
    assert remote is not None
    try:
        namespace = namespace_for(remote.target, args)
    except KubeconfigError as error:
        print(f"virtctl: {error}", file=sys.stderr)
        return 1
    options = ssh_options_from_args(args)
    guest = scp_host(remote.target, namespace, options, remote.path)
    argv = scp_argv(
        remote.target,
        namespace,
        options,
        guest if source else args.source,
        guest if destination else args.destination,
        recursive=args.recursive,
        preserve=args.preserve,
    )
    return run_client(argv)
