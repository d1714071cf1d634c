"""`virtctl vnc VMI`: the VMI's VNC display in a viewer; `vnc screenshot VMI -f F`: a PNG.

A local TCP port speaks the VMI's VNC: each connection to it opens the VMI's `vnc`
subresource and relays bytes both ways. As upstream, `virtctl vnc VMI` then starts a
viewer found on PATH (remote-viewer, else TigerVNC's vncviewer; `--vnc-type`/`--vnc-path`
choose) and ends when it exits; `--proxy-only` prints the port as JSON and serves until
interrupted. `vnc screenshot` writes the `vnc/screenshot` subresource's PNG to a file
(`-` for stdout).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from virtctl.commands.subresource import (
    Cluster,
    SubresourceError,
    add_cluster_flags,
    cluster_from_args,
    open_cluster,
)
from virtctl.portforwarding import forward_connection

__all__ = ["VIEWERS", "register", "relay_connection", "run", "viewer_command"]

#: The viewers looked for on PATH, in upstream's order, with the arguments each takes.
VIEWERS: dict[str, tuple[str, str]] = {
    "remote-viewer": ("remote-viewer", "vnc://127.0.0.1:{port}"),
    "tiger": ("vncviewer", "127.0.0.1:{port}"),
}
SCREENSHOT = "screenshot"


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add ``vnc`` (and ``vnc screenshot``) to ``subparsers``."""
    parser = subparsers.add_parser(
        "vnc",
        help="open a VMI's VNC display in a viewer (or proxy it, or take a screenshot)",
        epilog="examples:\n"
        "  virtctl vnc myvmi                      # in remote-viewer or vncviewer\n"
        '  virtctl vnc myvmi --proxy-only         # prints {"port": N}\n'
        "  virtctl vnc screenshot myvmi -f screen.png",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("name", metavar="VMI", help="the VMI name (or `screenshot VMI`)")
    parser.add_argument("target", nargs="?", help=argparse.SUPPRESS)
    parser.add_argument(
        "--proxy-only", action="store_true", help="only run the local proxy; print its port"
    )
    parser.add_argument("--port", type=int, default=0, help="local port (0: any free one)")
    parser.add_argument("--address", default="127.0.0.1", help="local address to listen on")
    parser.add_argument("--vnc-type", choices=tuple(VIEWERS), help="which viewer to start")
    parser.add_argument("--vnc-path", help="the viewer's executable (default: from PATH)")
    parser.add_argument("-f", "--file", help="screenshot: where to write the PNG (- for stdout)")
    parser.add_argument(
        "-m",
        "--move-cursor",
        action="store_true",
        help="screenshot: move the pointer first, to wake a screensaver",
    )
    add_cluster_flags(parser)
    parser.set_defaults(run=run)


def viewer_command(
    port: int, vnc_type: str | None = None, vnc_path: str | None = None
) -> list[str]:
    """The viewer to start for the proxy on `port`; ValueError saying what is missing."""
    if vnc_type is None and vnc_path is not None:
        raise ValueError("--vnc-path needs --vnc-type (tiger or remote-viewer)")
    choices = [vnc_type] if vnc_type is not None else list(VIEWERS)
    for choice in choices:
        binary, address = VIEWERS[choice]
        path = vnc_path or shutil.which(binary)
        if path is not None:
            if not os.access(path, os.X_OK):
                raise ValueError(f"specified VNC path is not an executable: {path}")
            return [path, address.format(port=port)]
    if vnc_type is not None:
        raise ValueError(f"could not find {VIEWERS[vnc_type][0]} in $PATH")
    names = " or ".join(VIEWERS[c][0] for c in VIEWERS)
    raise ValueError(f"could not find {names} binary in $PATH")


async def relay_connection(
    cluster: Cluster, name: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    """Relay one viewer connection; returns (never raises) when either side ends it."""
    await forward_connection(
        cluster,
        "virtualmachineinstances",
        name,
        "vnc",
        reader,
        writer,
        f"vnc of VMI {name}",
        protocols=("binary.kubevirt.io",),
    )


async def _serve(args: argparse.Namespace) -> int:
    # One client for all viewers: the kubeconfig (and any exec plugin) is read once.
    async with open_cluster(cluster_from_args(args)) as cluster:

        async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await relay_connection(cluster, args.name, reader, writer)

        server = await asyncio.start_server(connection, args.address, args.port)
        port = server.sockets[0].getsockname()[1]
        async with server:
            if args.proxy_only:
                print(json.dumps({"port": port}), flush=True)
                await server.serve_forever()
            try:
                command = viewer_command(port, args.vnc_type, args.vnc_path)
            except ValueError as error:
                raise SubresourceError(str(error)) from None
            viewer = await asyncio.create_subprocess_exec(*command)
            code = await viewer.wait()
    return 0 if code == 0 else 1


async def _screenshot(args: argparse.Namespace, name: str) -> bytes:
    async with open_cluster(cluster_from_args(args)) as cluster:
        path = cluster.path("virtualmachineinstances", name, "vnc/screenshot")
        query = [("moveCursor", "true")] if args.move_cursor else []
        return await cluster.request_bytes(path, query)


def _run_screenshot(args: argparse.Namespace) -> int:
    name = args.target
    if not args.file:
        print("virtctl vnc screenshot: -f/--file is required (- for stdout)", file=sys.stderr)
        return 2
    try:
        png = asyncio.run(_screenshot(args, name))
    except SubresourceError as error:
        print(f"virtctl: Can't access VMI {name}: {error}", file=sys.stderr)
        return 1
    if args.file == "-":
        sys.stdout.buffer.write(png)
        sys.stdout.buffer.flush()
        return 0
    try:
        Path(args.file).write_bytes(png)
    except OSError as error:
        print(f"virtctl: Can't write image to a file: {error}", file=sys.stderr)
        return 1
    return 0


def run(args: argparse.Namespace) -> int:
    """Serve (with a viewer, or until interrupted), or take a screenshot."""
    if args.name == SCREENSHOT and args.target:
        return _run_screenshot(args)
    if args.target:
        print(f"virtctl vnc: unexpected argument {args.target!r}", file=sys.stderr)
        return 2
    if not 0 <= args.port <= 65535:
        print("virtctl: --port: must be within 0..65535", file=sys.stderr)
        return 2
    try:
        return asyncio.run(_serve(args))
    except SubresourceError as error:
        print(f"virtctl: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    except OSError as error:
        print(f"virtctl: cannot listen on {args.address}:{args.port}: {error}", file=sys.stderr)
        return 1
