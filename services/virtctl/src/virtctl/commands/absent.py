"""Upstream commands whose capability kubevirt-py lacks: one line saying what is absent.

A user who types an upstream command learns why it cannot work here, with exit code 1,
instead of argparse's "invalid choice". Each entry names the missing component, so the
line stays true until that component exists (then the command gets its own module).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Any

__all__ = ["ABSENT", "AbsentCommand", "register", "run"]


@dataclass(frozen=True, slots=True)
class AbsentCommand:
    """An upstream command and what it would need."""

    command: str
    help: str
    missing: str


ABSENT: tuple[AbsentCommand, ...] = (
    AbsentCommand(
        "usbredir",
        "redirect a local USB device to a VMI (not available here)",
        "a USB redirection client (usbredirect) and virt-api's usbredir subresource, "
        "which kubevirt-py does not have",
    ),
    AbsentCommand(
        "image-upload",
        "upload a disk image to a DataVolume or PVC (not available here)",
        "CDI (the Containerized Data Importer and its upload proxy), "
        "which this cluster does not run",
    ),
    AbsentCommand(
        "guestfs",
        "start a libguestfs shell on a PVC (not available here)",
        "PVC volumes and a libguestfs-tools image, which kubevirt-py does not have yet",
    ),
    AbsentCommand(
        "template",
        "work with VirtualMachineTemplates (not available here)",
        "the template.kubevirt.io API (VirtualMachineTemplates), which kubevirt-py does not serve",
    ),
)


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add every command of `ABSENT` to ``subparsers``; any arguments are accepted."""
    for absent in ABSENT:
        parser = subparsers.add_parser(absent.command, help=absent.help, add_help=False)
        parser.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
        parser.set_defaults(run=run, absent=absent)


def run(args: argparse.Namespace) -> int:
    """Say what is missing; exit 1."""
    absent: AbsentCommand = args.absent
    print(f"virtctl {absent.command}: not available: it needs {absent.missing}", file=sys.stderr)
    return 1
