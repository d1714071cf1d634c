"""`virtctl adm log-verbosity`: show, set or reset each component's log verbosity.

As upstream: the verbosities live in the KubeVirt CR's
``spec.configuration.developerConfiguration.logVerbosity`` (0-9; 2 when unset), and every
component follows a change without a restart. ``--virt-handler`` alone shows, ``=N``
sets; ``--all`` covers every component; ``--reset`` empties the field first. Showing and
setting in one call is refused, as upstream refuses it.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Mapping
from typing import Any

from kube_runtime import ApiError, JsonPatchOp
from kubevirt_api.clusterconfig import VERBOSITY_FIELDS
from kubevirt_api.resources import KUBEVIRTS

from virtctl.commands.subresource import (
    ClusterFlags,
    SubresourceError,
    add_cluster_flags,
    cluster_from_args,
    open_cluster,
)

__all__ = ["DEFAULT_VERBOSITY", "Request", "plan_patch", "register", "run", "shown"]

#: Upstream's default verbosity of every component (pkg/virt-config).
DEFAULT_VERBOSITY = 2
MAX_VERBOSITY = 9
_SHOW = -1
_ALL = "all"
_DEVELOPER = "/spec/configuration/developerConfiguration"
_LOG_VERBOSITY = f"{_DEVELOPER}/logVerbosity"

Request = dict[str, int]
"""Flag name ("virt-handler", "all") -> verbosity, or `_SHOW` for a flag given bare."""


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add ``adm`` (with ``log-verbosity``) to ``subparsers``."""
    adm = subparsers.add_parser("adm", help="administer KubeVirt (log verbosity)")
    commands = adm.add_subparsers(dest="adm_command", metavar="COMMAND", required=True)
    parser = commands.add_parser(
        "log-verbosity",
        help="show, set or reset the log verbosity (0-9; default 2) of KubeVirt's components",
        description=__doc__,
        epilog="examples:\n"
        "  virtctl adm log-verbosity --all              # show every component's\n"
        "  virtctl adm log-verbosity --virt-handler=7   # set one\n"
        "  virtctl adm log-verbosity --all=3 --virt-handler=7\n"
        "  virtctl adm log-verbosity --reset            # back to the default (2)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    for flag in (*VERBOSITY_FIELDS, _ALL):
        parser.add_argument(
            f"--{flag}",
            dest=flag.replace("-", "_"),
            nargs="?",
            type=int,
            const=_SHOW,
            default=None,
            metavar="N",
            help=f"show (bare) or set (=N, 0-{MAX_VERBOSITY}) "
            + ("every component's verbosity" if flag == _ALL else f"{flag}'s verbosity"),
        )
    parser.add_argument(
        "--reset", action="store_true", help="empty logVerbosity (every component back to 2)"
    )
    add_cluster_flags(parser)
    parser.set_defaults(run=run)


def _request(args: argparse.Namespace) -> Request:
    given = {flag: getattr(args, flag.replace("-", "_")) for flag in (*VERBOSITY_FIELDS, _ALL)}
    return {flag: value for flag, value in given.items() if value is not None}


def _check(request: Request, reset: bool) -> str | None:
    """Why the flags cannot be acted on, or None."""
    for flag, value in request.items():
        if value != _SHOW and not 0 <= value <= MAX_VERBOSITY:
            return f"--{flag}: log verbosity must be 0-{MAX_VERBOSITY}"
    showing = any(v == _SHOW for v in request.values())
    setting = reset or any(v != _SHOW for v in request.values())
    if showing and setting:
        return "only show or set is allowed"
    if reset and _ALL in request:
        return "--reset and --all cannot be used together"
    if not showing and not setting:
        return "no flag specified - expecting at least one flag"
    return None


def _current(kubevirt: Mapping[str, Any]) -> tuple[dict[str, int], bool]:
    """logVerbosity as the CR has it, and whether developerConfiguration exists."""
    configuration = (kubevirt.get("spec") or {}).get("configuration") or {}
    developer = configuration.get("developerConfiguration")
    if not isinstance(developer, Mapping):
        return {}, False
    levels = developer.get("logVerbosity") or {}
    return {k: v for k, v in levels.items() if isinstance(v, int)}, True


def shown(request: Request, current: Mapping[str, int]) -> list[str]:
    """`component=N` lines for the components asked about (all with --all), sorted."""
    every = _ALL in request
    return sorted(
        f"{component}={current.get(field, DEFAULT_VERBOSITY)}"
        for component, field in VERBOSITY_FIELDS.items()
        if every or component in request
    )


def plan_patch(
    request: Request, reset: bool, current: Mapping[str, int], has_developer: bool
) -> list[JsonPatchOp]:
    """The JSON patch that sets (and first resets) the verbosities; [] for no change."""
    levels: dict[str, int] = {} if reset else dict(current)
    if request.get(_ALL, _SHOW) != _SHOW:
        levels.update(dict.fromkeys(VERBOSITY_FIELDS.values(), request[_ALL]))
    for component, field in VERBOSITY_FIELDS.items():
        if request.get(component, _SHOW) != _SHOW:
            levels[field] = request[component]
    if levels == dict(current) and not (reset and current):
        return []
    ops: list[JsonPatchOp] = []
    if not has_developer:
        ops.append({"op": "add", "path": _DEVELOPER, "value": {}})
    ops.append({"op": "add", "path": _LOG_VERBOSITY, "value": levels})
    return ops


async def _act(flags: ClusterFlags, request: Request, reset: bool) -> list[str]:
    async with open_cluster(flags) as cluster:
        try:
            listing = await cluster.client.list(KUBEVIRTS)
        except ApiError as error:
            raise SubresourceError(f"could not list KubeVirt CRs: {error.message}") from None
        items = [i for i in (listing.get("items") or []) if isinstance(i, Mapping)]
        if not items:
            raise SubresourceError("could not detect a KubeVirt installation")
        if len(items) > 1:
            raise SubresourceError(
                "invalid kubevirt installation, more than one KubeVirt resource found"
            )
        kubevirt = items[0]
        current, has_developer = _current(kubevirt)
        if any(v == _SHOW for v in request.values()):
            return shown(request, current)
        ops = plan_patch(request, reset, current, has_developer)
        if not ops:
            return []
        meta = kubevirt.get("metadata") or {}
        try:
            await cluster.client.json_patch(
                KUBEVIRTS, str(meta.get("name")), ops, str(meta.get("namespace"))
            )
        except ApiError as error:
            raise SubresourceError(f"patching the KubeVirt CR: {error.message}") from None
        return ["successfully set/reset the log verbosity"]


def run(args: argparse.Namespace) -> int:
    """Show or set; exit 2 for bad flags, 1 when the cluster refuses."""
    request = _request(args)
    problem = _check(request, args.reset)
    if problem is not None:
        print(f"virtctl adm log-verbosity: {problem}", file=sys.stderr)
        return 2
    try:
        lines = asyncio.run(_act(cluster_from_args(args), request, args.reset))
    except SubresourceError as error:
        print(f"virtctl adm log-verbosity: {error}", file=sys.stderr)
        return 1
    for line in lines:
        print(line)
    return 0
