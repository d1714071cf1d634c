"""`kv-images`: build kubevirt-py's images without a daemon and push them to a registry."""

from __future__ import annotations

import argparse
import getpass
import sys
from collections.abc import Sequence
from pathlib import Path

from kv_images.buildah import BuildError
from kv_images.builder import Builder
from kv_images.catalog import CATALOG, SERVICES
from kv_images.host import HostError
from kv_images.progress import Progress
from kv_images.registry import (
    Credentials,
    HttpRegistry,
    RegistryEndpoint,
    RegistryError,
    local_registry,
    read_authfile,
    split_ref,
)
from kv_images.workspace import Layout, cluster_state_dir, find_workspace

__all__ = ["main"]

# What `kv-images build` with no names builds: everything but the bases on their own.
DEFAULT_IMAGES = ("pause", "guest-kernel-boot", "guest-containerdisk", *SERVICES)


def _image_args(command: argparse.ArgumentParser) -> None:
    """What `build` and `push` share: image names (default: all) and -v."""
    command.add_argument("names", nargs="*", metavar="IMAGE", help="service or image name")
    command.add_argument("-v", "--verbose", action="store_true", help="show the tools' own output")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kv-images", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser(
        "build",
        help="build images (default: all) and push them to the local cluster's registry",
    )
    _image_args(build)
    build.add_argument(
        "--no-push",
        "--no-import",
        dest="no_push",
        action="store_true",
        help="only build into the cache",
    )
    build.add_argument(
        "--containerd",
        action="append",
        type=Path,
        metavar="SOCKET",
        help="also import (side-load) into this containerd (repeatable); nodes normally pull",
    )
    push = sub.add_parser(
        "push",
        help="build (cached) and push images to a registry (default: the local cluster's)",
    )
    _image_args(push)
    push.add_argument(
        "--registry",
        metavar="HOST[:PORT]",
        help="a registry you own; images go to HOST[:PORT]/kubevirt-py/<name>:<tag>",
    )
    push.add_argument(
        "--tag",
        action="append",
        default=[],
        metavar="TAG",
        help="also tag every image TAG (repeatable): one version for the release manifests",
    )
    push.add_argument(
        "--cert-dir",
        type=Path,
        metavar="DIR",
        help="trust the CA certificates (*.crt) in DIR for the registry's TLS",
    )
    push.add_argument(
        "--tls-verify",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="verify the registry's certificate (default: yes)",
    )
    login = push.add_mutually_exclusive_group()
    login.add_argument(
        "--creds",
        metavar="USER[:PASSWORD]",
        help="log in to --registry as USER (the password is asked for when left out)",
    )
    login.add_argument(
        "--authfile",
        type=Path,
        metavar="FILE",
        help="log in with --registry's entry in FILE (containers auth.json, docker config.json)",
    )
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


def _local_registry() -> HttpRegistry | None:
    """The local cluster's registry when kv-cluster recorded one; it must answer."""
    endpoint = local_registry(cluster_state_dir())
    if endpoint is None:
        return None
    registry = HttpRegistry(endpoint)
    try:
        registry.ping()
    except RegistryError as exc:
        raise HostError(
            f"{exc}\n  the local cluster's registry does not answer: see `kv-cluster status` "
            "(`kv-cluster up` restarts it), or build with --no-push"
        ) from None
    return registry


def _login(args: argparse.Namespace) -> Credentials | None:
    """--creds or --authfile, for --registry; None when neither is given."""
    if args.creds:
        user, sep, password = args.creds.partition(":")
        return Credentials(user, password if sep else getpass.getpass(f"password for {user}: "))
    if args.authfile:
        found = read_authfile(args.authfile, args.registry)
        if found is None:
            raise HostError(f"{args.authfile} holds no login for {args.registry}")
        return found
    return None


def _push(builder: Builder, names: list[str], args: argparse.Namespace, progress: Progress) -> int:
    """`kv-images push`: to --registry, else to the local cluster's registry."""
    if args.registry:
        endpoint = RegistryEndpoint(
            args.registry, cert_dir=args.cert_dir, tls_verify=args.tls_verify
        )
        registry = HttpRegistry(endpoint, _login(args))
        upstream = False  # the upstream examples' names are the local mirror's business
    elif args.creds or args.authfile:
        raise HostError("--creds and --authfile go with --registry (the local one needs none)")
    else:
        local = _local_registry()
        if local is None:
            raise HostError(
                f"no registry runs for the local cluster in {cluster_state_dir()} "
                "(`kv-cluster up` starts it); or name one with --registry HOST[:PORT]"
            )
        endpoint, registry, upstream = local.endpoint, local, True
    registry.ping()
    built = builder.build(names)
    for result in builder.push_to(built, registry, upstream=upstream, tags=args.tag):
        repo, tag = split_ref(result.ref)
        state = "pushed" if result.pushed else "already there"
        print(f"{endpoint.address}/{repo}:{tag}  {result.digest}  {state}")
    return 0


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
        if args.command == "push":
            return _push(builder, names, args, progress)
        built = builder.build(names)
        if not args.no_push:
            local = _local_registry()
            if local is None:
                progress.say(
                    "push",
                    "the local cluster runs no registry; images stay in the cache "
                    "(kv-cluster up pushes what it needs, or use `kv-images push --registry`)",
                )
            else:
                builder.push_to(built, local)
            for socket in args.containerd or []:
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
