"""virtctl's subcommands, one module each; every module exposes ``register(subparsers)``.

``register`` adds the subcommand's parser and sets ``run`` (``args -> exit code``).
"""

from __future__ import annotations

import argparse
from typing import Any, Protocol

from virtctl.commands import (
    console,
    convert,
    expand,
    expose,
    guestosinfo,
    migrate,
    pause,
    portforward,
    restart,
    scp,
    softreboot,
    ssh,
    start,
    stop,
    unpause,
    validate,
    version,
    vnc,
)

__all__ = ["COMMANDS", "Command"]


class Command(Protocol):
    """A subcommand module."""

    def register(self, subparsers: argparse._SubParsersAction[Any]) -> None:
        """Add this subcommand's parser to ``subparsers``."""
        ...


COMMANDS: tuple[Command, ...] = (validate, version, convert)
COMMANDS += (start, stop, restart, migrate, pause, unpause, softreboot, guestosinfo, expand)
COMMANDS += (console, vnc, portforward, ssh, scp, expose)
