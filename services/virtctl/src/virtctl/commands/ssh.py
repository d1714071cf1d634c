"""`virtctl ssh [user@]vmi/NAME[/NAMESPACE]`: the system's ssh to the guest, through
`virtctl port-forward --stdio` as its ProxyCommand (see virtctl.sshing)."""

from __future__ import annotations

import argparse
import asyncio
import shutil
import subprocess
import sys
from typing import Any

from kube_runtime import KubeconfigError, load_kubeconfig

from virtctl.commands.subresource import add_cluster_flags, cluster_from_args
from virtctl.sshing import add_ssh_flags, ssh_argv, ssh_options_from_args
from virtctl.targets import Target, TargetError, parse_ssh_target

__all__ = ["namespace_for", "register", "run", "run_client"]


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add ``ssh`` to ``subparsers``."""
    parser = subparsers.add_parser(
        "ssh",
        help="open an SSH connection to a virtual machine (instance)",
        description="Run the system's ssh against a VM or VMI, tunnelled through the "
        "portforward subresource (upstream's --local-ssh; the only mode here).",
    )
    parser.add_argument("target", help="[user@]vmi/NAME[/NAMESPACE] or [user@]vm/NAME[/NAMESPACE]")
    parser.add_argument("-c", "--command", default="", help="run this command instead of a shell")
    add_ssh_flags(parser)
    add_cluster_flags(parser)
    parser.set_defaults(run=run)


def namespace_for(target: Target, args: argparse.Namespace) -> str:
    """The target's namespace, else the one kubectl would use (-n, the context's, default)."""
    if target.namespace:
        return target.namespace
    loaded = asyncio.run(load_kubeconfig(cluster_from_args(args).overrides))
    return loaded.namespace


def run_client(argv: list[str]) -> int:
    """Run ssh/scp attached to this terminal; its exit code."""
    if shutil.which(argv[0]) is None:
        print(
            f"virtctl: {argv[0]} not found on PATH (Debian: apt-get install openssh-client)",
            file=sys.stderr,
        )
        return 1
    try:
        return subprocess.call(argv)
    except KeyboardInterrupt:
        return 130


def run(args: argparse.Namespace) -> int:
    """Exec ssh and return its exit code."""
    try:
        target = parse_ssh_target(args.target)
    except TargetError as error:
        print(f"virtctl: ssh: {error}", file=sys.stderr)
        return 2
    try:
        namespace = namespace_for(target, args)
    except KubeconfigError as error:
        print(f"virtctl: {error}", file=sys.stderr)
        return 1
    command = [args.command] if args.command else []
    return run_client(ssh_argv(target, namespace, ssh_options_from_args(args), command))
