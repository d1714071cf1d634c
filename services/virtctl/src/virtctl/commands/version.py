"""`virtctl version`: the client's version (the server's once virt-api serves it)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from virtctl.version import client_version_info

__all__ = ["register", "run"]


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add ``version`` to ``subparsers``."""
    parser = subparsers.add_parser("version", help="print the client (and server) version")
    parser.add_argument(
        "--client", action="store_true", help="only the client version (no cluster needed)"
    )
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Print the versions; exit 0."""
    info = client_version_info()
    if args.output == "json":
        print(json.dumps({"clientVersion": info}, indent=2))
        return 0
    print(
        f"Client Version: {info['gitVersion']} ({info['implementation']}, "
        f"{info['platform']}, Python {info['pythonVersion']})"
    )
    # Querying virt-api's version subresource comes with the cluster client.
    return 0
