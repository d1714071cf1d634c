"""The `virtctl` entry point: argparse with one module per subcommand.

Installed twice: as `virtctl` and as `kubectl-virt`, so that `kubectl virt ...` runs it as
a kubectl plugin; usage and help name whichever was run. Errors reach the user as one
line on stderr and an exit code, never as a traceback (set VIRTCTL_DEBUG=1 to see one
for an internal error).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

from virtctl.commands import COMMANDS
from virtctl.commands.subresource import add_cluster_flags
from virtctl.version import client_version

__all__ = ["EXIT_INTERNAL", "build_parser", "main", "program_name"]

# argparse exits 2 on usage errors; an unexpected failure gets its own code.
EXIT_INTERNAL = 3


def program_name(executable: str) -> str:
    """How the user ran us: `kubectl virt` for the plugin `kubectl-virt`, else `virtctl`."""
    base = Path(executable).name
    if base.startswith("kubectl-"):
        # kubectl's plugin naming: dashes separate words, an underscore stands for a dash.
        return "kubectl " + base.removeprefix("kubectl-").replace("-", " ").replace("_", "-")
    return "virtctl"


def build_parser(prog: str = "virtctl") -> argparse.ArgumentParser:
    """The full parser, with every subcommand registered."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Control KubeVirt virtual machines (kubevirt-py).",
    )
    parser.add_argument("--version", action="version", version=f"virtctl {client_version()}")
    add_cluster_flags(parser, root=True)
    subcommands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        command.register(subcommands)
    # `completion` describes the whole tree.
    parser.set_defaults(root_parser=parser)
    return parser


# The loggers -v speaks for: ours, then the libraries a request goes through.
_LOGGERS = ("virtctl", "kube_runtime", "kubernetes_asyncio", "aiohttp")


@contextlib.contextmanager
def _verbosity(level: int) -> Iterator[None]:
    """kubectl's -v: 6 and up logs the kubeconfig files and each request, 8 and up the
    libraries' debug logs; to stderr, so that stdout stays the command's output.

    Below 6 nothing is logged but kubernetes_asyncio's errors are silenced: what they say
    reaches the user as virtctl's one-line error. The loggers get their own handler and
    do not propagate, so the root logger (whoever configured it) is left alone.
    """
    loggers = [logging.getLogger(name) for name in _LOGGERS]
    saved = [(logger.level, logger.propagate) for logger in loggers]
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname).1s%(asctime)s %(name)s] %(message)s"))
    for logger in loggers:
        if level >= 6:
            ours = logger.name == "virtctl"
            logger.setLevel(
                logging.DEBUG if level >= 8 else logging.INFO if ours else logging.WARNING
            )
            logger.addHandler(handler)
            logger.propagate = False
        else:
            logger.setLevel(
                logging.CRITICAL if logger.name == "kubernetes_asyncio" else logging.WARNING
            )
    try:
        yield
    finally:
        for logger, (old_level, old_propagate) in zip(loggers, saved, strict=True):
            logger.removeHandler(handler)
            logger.setLevel(old_level)
            logger.propagate = old_propagate


# Upstream's boolean flags (cobra's) also take `--flag=true|false`; argparse's store_true
# takes no value, so those spellings are rewritten first.
GO_BOOL_FLAGS = ("--stdio", "--local-ssh")


def _go_bools(argv: Sequence[str]) -> list[str]:
    out: list[str] = []
    for index, arg in enumerate(argv):
        if arg == "--":
            return out + list(argv[index:])
        flag, eq, value = arg.partition("=")
        if eq and flag in GO_BOOL_FLAGS and value.lower() in ("true", "false"):
            if value.lower() == "true":
                out.append(flag)
            continue
        out.append(arg)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Run virtctl with ``argv`` (default: the process arguments); returns the exit code."""
    parser = build_parser(program_name(sys.argv[0]))
    try:
        args = parser.parse_args(_go_bools(sys.argv[1:] if argv is None else argv))
        with _verbosity(args.verbosity):
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
