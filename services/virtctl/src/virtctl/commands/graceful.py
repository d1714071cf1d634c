"""The `--force`/`--grace-period` pair that `stop` and `restart` share, with upstream's rule.

Upstream's virtctl accepts the two only together ("Must both use --force=true and set
--grace-period."): a grace period alone, or --force alone, is a usage error (exit 2).
"""

from __future__ import annotations

import argparse

__all__ = ["USAGE_ERROR", "add_force_flags", "forced_grace_period"]

USAGE_ERROR = "Must both use --force=true and set --grace-period."


def add_force_flags(parser: argparse.ArgumentParser, verb: str) -> None:
    """Add --force and --grace-period to a command that would `verb` a VM."""
    parser.add_argument(
        "--force",
        action="store_true",
        help=f"{verb} without waiting the VMI's own grace period (needs --grace-period)",
    )
    parser.add_argument(
        "--grace-period",
        type=int,
        default=None,
        metavar="SECONDS",
        help="seconds the guest gets to shut down (needs --force; 0: at once)",
    )


def forced_grace_period(args: argparse.Namespace) -> int | None:
    """The grace period to send, None for none; ValueError with the message for bad usage."""
    grace_period: int | None = args.grace_period
    if (grace_period is not None) != bool(args.force):
        raise ValueError(USAGE_ERROR)
    if grace_period is not None and grace_period < 0:
        raise ValueError("--grace-period must be 0 or more seconds")
    return grace_period
