"""virtctl's subcommands, one module each; every module exposes ``register(subparsers)``.

``register`` adds the subcommand's parser and sets ``run`` (``args -> exit code``).
"""

from __future__ import annotations

import argparse
from typing import Any, Protocol

from virtctl.commands import (
    absent,
    adm,
    completion,
    console,
    convert,
    create,
    credentials,
    evacuate_cancel,
    expand,
    expose,
    guestagent,
    memorydump,
    migrate,
    migrate_cancel,
    objectgraph,
    permitted_devices,
    portforward,
    restart,
    scp,
    ssh,
    start,
    stop,
    validate,
    version,
    vmexport,
    vmi_actions,
    vnc,
    volumes,
)

__all__ = ["COMMANDS", "Command"]


class Command(Protocol):
    """A subcommand module."""

    def register(self, subparsers: argparse._SubParsersAction[Any]) -> None:
        """Add this subcommand's parser to ``subparsers``."""
        ...


COMMANDS: tuple[Command, ...] = (validate, version, convert, create)
COMMANDS += (start, stop, restart, migrate, vmi_actions, guestagent, expand, objectgraph)
COMMANDS += (console, vnc, portforward, ssh, scp, expose, completion, adm)
COMMANDS += (migrate_cancel, evacuate_cancel, permitted_devices, credentials)
COMMANDS += (vmexport, volumes, memorydump)
# Last: upstream's commands whose capability is absent here, each saying what it needs.
COMMANDS += (absent,)
