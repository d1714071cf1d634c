"""The `virtctl` entry point: argparse with one module per subcommand.

Errors reach the user as one line on stderr and an exit code, never as a traceback
(set VIRTCTL_DEBUG=1 to see one for an internal error).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from virtctl.commands import COMMANDS
from virtctl.version import client_version

__all__ = ["EXIT_INTERNAL", "build_parser", "main"]

# argparse exits 2 on usage errors; an unexpected failure gets its own code.
EXIT_INTERNAL = 3


def build_parser() -> argparse.ArgumentParser:
    """The full parser, with every subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="virtctl",
        description="Control KubeVirt virtual machines (kubevirt-py).",
    )
    parser.add_argument("--version", action="version", version=f"virtctl {client_version()}")
    subcommands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        command.register(subcommands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run virtctl with ``argv`` (default: the process arguments); returns the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        code: int = args.run(args)
    except SystemExit as exc:  # argparse: --help, --version, usage errors
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    except KeyboardInterrupt:
        print("virtctl: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader of our output went away (e.g. `| head`): not an error worth a message.
        sys.stderr.close()
        return 1
    except Exception as exc:
        if os.environ.get("VIRTCTL_DEBUG"):
            raise
        print(
            f"virtctl: internal error: {type(exc).__name__}: {exc} "
            "(set VIRTCTL_DEBUG=1 for a traceback)",
            file=sys.stderr,
        )
        return EXIT_INTERNAL
    return code


if __name__ == "__main__":
    raise SystemExit(main())
