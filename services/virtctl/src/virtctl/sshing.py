"""The system's `ssh`/`scp` over `virtctl port-forward --stdio` (upstream's `--local-ssh`).

The client is always the system's (Debian `openssh-client`); upstream's built-in Go
client has no counterpart here, so `--local-ssh` is accepted and is the only mode. The
guest is named `[user@]<kind>.<name>.<namespace>` (what ssh stores in known_hosts, as
upstream), and reached through `-o ProxyCommand=<this virtctl> port-forward --stdio=true
<kind>/<name>/<namespace> <port>`, with the cluster flags the user gave passed on.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

from virtctl.targets import Target

__all__ = [
    "SshOptions",
    "add_ssh_flags",
    "proxy_command",
    "scp_argv",
    "scp_host",
    "ssh_argv",
    "ssh_options_from_args",
    "virtctl_command",
]

# Cluster flags the ProxyCommand's virtctl needs to reach the same cluster as this one.
_PASSED_FLAGS = (
    ("kubeconfig", "--kubeconfig"),
    ("context", "--context"),
    ("server", "--server"),
    ("token", "--token"),
    ("impersonate", "--as"),
)


@dataclass(frozen=True, slots=True)
class SshOptions:
    """What ssh and scp share: the guest's port and how to log in."""

    port: int = 22
    username: str = ""
    identity_file: str | None = None
    known_hosts: str | None = None
    local_options: tuple[str, ...] = ()
    cluster_flags: tuple[str, ...] = field(default=())


def virtctl_command() -> list[str]:
    """How this virtctl was started, to run it again as the ProxyCommand."""
    program = sys.argv[0] if sys.argv and sys.argv[0] else "virtctl"
    if program.endswith("__main__.py") or program == "-m":
        return [sys.executable, "-m", "virtctl"]
    return [os.path.abspath(program) if os.sep in program else program]


def _default_username() -> str:
    return next((os.environ[v] for v in ("USER", "USERNAME", "LOGNAME") if os.environ.get(v)), "")


def add_ssh_flags(parser: argparse.ArgumentParser) -> None:
    """upstream's flags shared by ssh and scp."""
    parser.add_argument(
        "-i", "--identity-file", default=None, help="private key for the guest (default: ssh's)"
    )
    parser.add_argument(
        "-l",
        "--username",
        default=_default_username(),
        help="user to log in as (default: $USER; `user@` in the target wins)",
    )
    parser.add_argument(
        "-p", "--port", type=int, default=22, help="the guest's SSH port (default 22)"
    )
    parser.add_argument(
        "--known-hosts",
        default=None,
        help="known_hosts file, passed as -o UserKnownHostsFile (default: ssh's own)",
    )
    parser.add_argument(
        "-t",
        "--local-ssh-opts",
        action="append",
        default=[],
        metavar="OPTS",
        help="options for the local client, e.g. -t '-o StrictHostKeyChecking=no' (repeatable)",
    )
    parser.add_argument(
        "--local-ssh",
        action="store_true",
        help="use the system's client: the only mode here, so always on (accepted, also as "
        "--local-ssh=true|false, for upstream's scripts)",
    )


def ssh_options_from_args(args: argparse.Namespace) -> SshOptions:
    """The shared flags of a parsed ssh/scp command line."""
    flags: list[str] = []
    for dest, flag in _PASSED_FLAGS:
        value = getattr(args, dest, None)
        if value:
            flags += [flag, str(value)]
    for group in getattr(args, "impersonate_groups", None) or ():
        flags += ["--as-group", group]
    if getattr(args, "insecure_skip_tls_verify", False):
        flags.append("--insecure-skip-tls-verify")
    local: list[str] = []
    for text in args.local_ssh_opts:
        local += shlex.split(text)
    return SshOptions(
        port=args.port,
        username=args.username or "",
        identity_file=args.identity_file,
        known_hosts=args.known_hosts,
        local_options=tuple(local),
        cluster_flags=tuple(flags),
    )


def proxy_command(target: Target, namespace: str, options: SshOptions) -> str:
    """`-o ProxyCommand=…`'s value: run by ssh through the shell, with `%` as its token mark."""
    argv = [
        *virtctl_command(),
        "port-forward",
        "--stdio=true",
        f"{target.kind}/{target.name}/{namespace}",
        str(options.port),
        *options.cluster_flags,
    ]
    return " ".join(shlex.quote(a) for a in argv).replace("%", "%%")


def _common(target: Target, namespace: str, options: SshOptions) -> list[str]:
    argv = ["-o", f"ProxyCommand={proxy_command(target, namespace, options)}"]
    argv += options.local_options
    if options.identity_file:
        argv += ["-i", options.identity_file]
    if options.known_hosts:
        argv += ["-o", f"UserKnownHostsFile={options.known_hosts}"]
    return argv


def _host(target: Target, namespace: str, options: SshOptions) -> str:
    user = target.user or options.username
    host = f"{target.kind}.{target.name}.{namespace}"
    return f"{user}@{host}" if user else host


def ssh_argv(
    target: Target, namespace: str, options: SshOptions, command: Sequence[str] = ()
) -> list[str]:
    """`ssh -o ProxyCommand=… [opts] [-i key] user@vmi.name.ns [command]`."""
    argv = ["ssh", *_common(target, namespace, options), _host(target, namespace, options)]
    return argv + list(command)


def scp_argv(
    remote: Target,
    namespace: str,
    options: SshOptions,
    source: str,
    destination: str,
    *,
    recursive: bool = False,
    preserve: bool = False,
) -> list[str]:
    """`scp -o ProxyCommand=… [opts] [-r] [-p] SRC DST`; `source`/`destination` already
    carry `user@vmi.name.ns:` on the guest's side (`scp_host` makes it)."""
    argv = ["scp", *_common(remote, namespace, options)]
    if recursive:
        argv.append("-r")
    if preserve:
        argv.append("-p")
    return [*argv, source, destination]


def scp_host(target: Target, namespace: str, options: SshOptions, path: str) -> str:
    """The guest side of an scp argument: `user@vmi.name.ns:path`."""
    return f"{_host(target, namespace, options)}:{path}"
