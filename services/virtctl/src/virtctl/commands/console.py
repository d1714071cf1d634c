"""`virtctl console VMI`: the guest's serial console, through the aggregated API.

Interactive on a terminal (Ctrl+] leaves, as upstream). `--timeout MINUTES` (upstream's
flag, default 5) is how long to wait for the VMI to exist and run before giving up. For
scripts: piped stdin is typed into the console, and `--until TEXT` exits 0 as soon as
TEXT appears in the output, 1 if the stream ends or `--timeout-seconds` passes first.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import termios
import tty
from typing import Any

from virtctl.commands.subresource import (
    SubresourceError,
    add_cluster_flags,
    cluster_from_args,
    open_cluster,
)
from virtctl.streams import StreamEndedError, relay_stream

__all__ = ["register", "run"]

ESCAPE = b"\x1d"  # Ctrl+]
DEFAULT_TIMEOUT_MINUTES = 5.0


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add ``console`` to ``subparsers``."""
    parser = subparsers.add_parser(
        "console",
        help="connect to a VMI's serial console",
        epilog="examples:\n  virtctl console myvmi\n  virtctl console --timeout=1 myvmi\n"
        "  virtctl console myvmi --until 'login:' --timeout-seconds 60   # for scripts",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("name", help="the VMI name")
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_MINUTES,
        metavar="MINUTES",
        help="minutes to wait for the VMI to be running (upstream's flag; default 5)",
    )
    parser.add_argument("--until", help="exit 0 once this text appears in the output")
    parser.add_argument(
        "--timeout-seconds", type=float, default=0, help="give up after this long (0: never)"
    )
    add_cluster_flags(parser)
    parser.set_defaults(run=run)


async def _console(args: argparse.Namespace) -> bool:
    seen = bytearray()
    wanted = args.until.encode() if args.until else None
    found = False

    def to_user(data: bytes) -> None:
        nonlocal found
        os.write(sys.stdout.fileno(), data)
        if wanted is not None:
            seen.extend(data)
            if wanted in seen:
                found = True
                raise StreamEndedError()
            del seen[: max(0, len(seen) - len(wanted) - 4096)]

    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[bytes] = asyncio.Queue()
    interactive = sys.stdin.isatty() and wanted is None

    def readable() -> None:
        data = os.read(sys.stdin.fileno(), 1024)
        if interactive and (ESCAPE in data or not data):
            queue.put_nowait(b"")
        elif data:
            queue.put_nowait(data)
        else:
            # Piped input (scripts) is typed as it comes; its end leaves the console open.
            loop.remove_reader(sys.stdin.fileno())

    with contextlib.suppress(PermissionError, OSError):  # /dev/null or a file: no input
        loop.add_reader(sys.stdin.fileno(), readable)
    async with open_cluster(cluster_from_args(args)) as cluster:
        await relay_stream(
            cluster,
            args.name,
            "console",
            to_user,
            queue.get,
            connect_within=max(0.0, args.timeout) * 60,
            # stderr, "\r\n": stdout is the guest's, and a raw terminal needs the return.
            progress=lambda line: print(f"virtctl: {args.name}: {line}\r", file=sys.stderr),
        )
    return found


def run(args: argparse.Namespace) -> int:
    """Relay the console; see the module docstring for exit codes."""
    if args.until is not None and not args.until:
        print("virtctl: --until: must not be empty", file=sys.stderr)
        return 2
    raw_tty = args.until is None and sys.stdin.isatty()
    saved = termios.tcgetattr(sys.stdin.fileno()) if raw_tty else None
    try:
        if raw_tty:
            tty.setraw(sys.stdin.fileno())
            print("Successfully connected to the console. Press Ctrl+] to exit.\r", file=sys.stderr)
        timeout = args.timeout_seconds or None
        found = asyncio.run(asyncio.wait_for(_console(args), timeout))
    except SubresourceError as error:
        print(
            f"virtctl: cannot connect to the console of VMI {args.name}: {error}", file=sys.stderr
        )
        return 1
    except TimeoutError:
        print(
            f"\nvirtctl: console of VMI {args.name}: "
            + (f"{args.until!r} not seen within" if args.until else "closed after")
            + f" {args.timeout_seconds:g}s",
            file=sys.stderr,
        )
        return 1
    finally:
        if saved is not None:
            with contextlib.suppress(termios.error):
                termios.tcsetattr(sys.stdin.fileno(), termios.TCSADRAIN, saved)
    if args.until is not None and not found:
        print(f"\nvirtctl: the console closed before {args.until!r} appeared", file=sys.stderr)
        return 1
    return 0
