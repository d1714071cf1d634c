"""`kv-images`: build kubevirt-py's images without a daemon and import them into the node."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from kv_images.buildah import BuildError
from kv_images.builder import Builder
from kv_images.catalog import CATALOG, SERVICES
from kv_images.host import HostError
from kv_images.progress import Progress
from kv_images.workspace import Layout, find_workspace

__all__ = ["default_containerd_sockets", "main"]

# What `kv-images build` with no names builds: everything but the bases on their own.
DEFAULT_IMAGES = ("pause", "guest-kernel-boot", "guest-containerdisk", *SERVICES)


def default_containerd_sockets() -> list[Path]:
    """The containerd sockets of the local cluster's nodes that are up (kv-cluster's layout)."""
    state = os.environ.get("KV_CLUSTER_STATE_DIR")
    if state:
        root = Path(state)
    else:
        xdg = os.environ.get("XDG_STATE_HOME")
        root = (Path(xdg) if xdg else Path.home() / ".local" / "state") / "kubevirt-py" / "cluster"
    return sorted(p for p in root.glob("nodes/*/containerd/containerd.sock") if p.is_socket())


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kv-images", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser(
        "build", help="build images (default: all) and import them into the node"
    )
    build.add_argument("names", nargs="*", metavar="IMAGE", help="service or image name")
    build.add_argument("--no-import", action="store_true", help="only build into the cache")
    build.add_argument(
        "--containerd",
        action="append",
        type=Path,
        metavar="SOCKET",
        help="containerd socket to import into (repeatable; default: every local node that is up)",
    )
    build.add_argument("-v", "--verbose", action="store_true", help="show the tools' own output")
    sub.add_parser("list", help="list the images kv-images knows")
    ref = sub.add_parser("ref", help="print an image's content-tagged reference")
    ref.add_argument("name", metavar="IMAGE")
    context = sub.add_parser(
        "context", help="write an image's build context (to build it elsewhere)"
    )
    context.add_argument("name", metavar="IMAGE")
    context.add_argument("directory", type=Path)
    return parser


def _check_names(names: Sequence[str]) -> None:
    unknown = [n for n in names if n not in CATALOG]
    if unknown:
        raise HostError(
            f"unknown image(s): {', '.join(unknown)}; valid names: {', '.join(sorted(CATALOG))}"
        )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (0 ok, 1 build/host error, 2 usage)."""
    args = _parser().parse_args(argv)
    progress = Progress(verbose=getattr(args, "verbose", False))
    try:
        workspace = find_workspace()
        builder = Builder(workspace, Layout.default(), progress)
        if args.command == "list":
            for name, spec in CATALOG.items():
                base = f" (FROM {spec.base})" if spec.base else ""
                print(f"{name:22} {spec.kind:8} {spec.containerfile}{base}")
            return 0
        if args.command == "ref":
            _check_names([args.name])
            print(builder.ref(args.name))
            return 0
        if args.command == "context":
            _check_names([args.name])
            spec = CATALOG[args.name]
            args.directory.mkdir(parents=True, exist_ok=True)
            if any(args.directory.iterdir()):
                raise HostError(f"context directory {args.directory} must be empty")
            spec.context.populate(args.directory, workspace, builder.layout, progress)
            print(
                f"context for {args.name} written to {args.directory}; build with: "
                f"docker build -f {spec.containerfile} {args.directory}"
            )
            return 0
        names = args.names or list(DEFAULT_IMAGES)
        _check_names(names)
        built = builder.build(names)
        if not args.no_import:
            sockets = args.containerd or default_containerd_sockets()
            if not sockets:
                progress.say(
                    "import",
                    "no local node is up; images stay in the cache "
                    "(kv-cluster up imports them, or pass --containerd SOCKET)",
                )
            for socket in sockets:
                builder.import_into(built, socket)
        for image in built:
            state = "cached" if image.cached else f"built in {image.seconds:.1f} s"
            print(f"{image.ref}  {image.size / 2**20:7.1f} MiB  {state}")
        return 0
    except (BuildError, HostError, FileNotFoundError) as exc:
        print(f"kv-images: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("kv-images: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
