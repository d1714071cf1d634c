"""`virtctl addvolume` and `virtctl removevolume`: volume hotplug, as upstream's
pkg/virtctl/vm/add_volume.go and remove_volume.go.

Both call the VirtualMachine's subresource (declarative hotplug: the VM's template keeps
the volume and virt-controller plugs it into the running VMI) and, when there is no such
VM, the standalone VMI's. upstream deprecated ``--persist`` (it has no effect), so here.
A concurrent change of the VM (virt-api answers 409 "changed meanwhile") is retried.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
from collections.abc import Mapping
from typing import Any

from kube_runtime import PERSISTENT_VOLUME_CLAIMS, ApiError
from kubevirt_api.diskserial import disk_serial_problem

from virtctl.commands.subresource import (
    Cluster,
    SubresourceError,
    add_cluster_flags,
    cluster_from_args,
    dry_run_body,
    open_cluster,
)

__all__ = ["BUSES", "CACHES", "DISK_TYPES", "MAX_NAME_LENGTH", "MAX_RETRIES", "register"]

DISK_TYPES = ("disk", "lun")
BUSES = ("scsi", "virtio")
CACHES = ("none", "writethrough", "writeback")
# A volume's name is a DNS-1035 label (upstream's check).
MAX_NAME_LENGTH = 63
MAX_RETRIES = 15
_PERSIST_HELP = "[deprecated] this flag has no effect and will be removed in a future release"
_CHANGED_MEANWHILE = "changed meanwhile"


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add ``addvolume`` and ``removevolume`` to ``subparsers``."""
    add = subparsers.add_parser("addvolume", help="add a volume to a running VM")
    add.add_argument("name", metavar="VM", help="the VirtualMachine (or standalone VMI)")
    add.add_argument("--volume-name", required=True, help="the PersistentVolumeClaim to plug in")
    add.add_argument(
        "--disk-name",
        default="",
        help="name of the volume and disk in the spec (default: the claim's name)",
    )
    add.add_argument(
        "--serial", default="", help="serial number of the disk (default: its name, if valid)"
    )
    add.add_argument(
        "--cache", default="", help="the disk's cache: none, writethrough or writeback"
    )
    add.add_argument(
        "--disk-type", default="disk", help="disk or lun (default: disk)", metavar="TYPE"
    )
    add.add_argument("--bus", default="scsi", help="scsi or virtio (default: scsi)")
    add.add_argument("--persist", action="store_true", help=_PERSIST_HELP)
    add.add_argument(
        "--dry-run", action="store_true", help="show what would happen; change nothing"
    )
    add_cluster_flags(add)
    add.set_defaults(run=run_add)

    remove = subparsers.add_parser("removevolume", help="remove a volume from a running VM")
    remove.add_argument("name", metavar="VM", help="the VirtualMachine (or standalone VMI)")
    remove.add_argument(
        "--volume-name", required=True, help="the volume's name in the spec (or its claim's)"
    )
    remove.add_argument("--persist", action="store_true", help=_PERSIST_HELP)
    remove.add_argument(
        "--dry-run", action="store_true", help="show what would happen; change nothing"
    )
    add_cluster_flags(remove)
    remove.set_defaults(run=run_remove)


def _add_options(args: argparse.Namespace) -> dict[str, Any]:
    """AddVolumeOptions from the flags; ValueError with upstream's words for a bad one."""
    name = args.disk_name or args.volume_name
    if len(name) > MAX_NAME_LENGTH:
        if args.disk_name:
            raise ValueError(
                f"Invalid disk name {name}, must not exceed {MAX_NAME_LENGTH} characters"
            )
        raise ValueError(
            f"Invalid volume name {name}, must not exceed {MAX_NAME_LENGTH} characters. "
            "Use in conjunction with --disk-name to specify a shorter name"
        )
    if args.disk_type == "disk":
        if args.bus not in BUSES:
            raise ValueError(
                f"Invalid bus type '{args.bus}' for disk. Only 'scsi' and 'virtio' are supported."
            )
    elif args.disk_type == "lun":
        if args.bus != "scsi":
            raise ValueError(
                f"Invalid bus type '{args.bus}' for LUN disk. Only 'scsi' bus is supported."
            )
    else:
        raise ValueError(f"Invalid disk type '{args.disk_type}'. Only LUN and Disk are supported.")
    disk: dict[str, Any] = {args.disk_type: {"bus": args.bus}}
    if args.serial:
        disk["serial"] = args.serial
    elif disk_serial_problem(name) is None:
        # upstream names the serial after the disk; a name our serial rule refuses (a '.'
        # or over 36 characters) goes without one rather than fail the call.
        disk["serial"] = name
    if args.cache:
        if args.cache not in CACHES:
            raise ValueError(f"invalid cache value {args.cache}")
        disk["cache"] = args.cache
    return {
        "name": name,
        "disk": disk,
        "volumeSource": {"persistentVolumeClaim": {"claimName": args.volume_name}},
        **dry_run_body(args),
    }


async def _claim_exists(cluster: Cluster, claim: str) -> None:
    try:
        await cluster.client.get(PERSISTENT_VOLUME_CLAIMS, claim, cluster.namespace)
    except ApiError as error:
        if error.not_found:
            # upstream's words (DataVolumes need CDI, absent here: only claims are looked for).
            raise SubresourceError(
                f"Volume {claim} is not a DataVolume or PersistentVolumeClaim"
            ) from None
        raise SubresourceError(f"reading PersistentVolumeClaim {claim}: {error.message}") from None


async def _submit(cluster: Cluster, name: str, action: str, body: Mapping[str, Any]) -> None:
    """PUT the VM's subresource, or the VMI's when there is no such VM; retry conflicts."""
    for attempt in range(1, MAX_RETRIES + 1):
        try:
            try:
                await cluster.request("PUT", cluster.path("virtualmachines", name, action), body)
            except SubresourceError as error:
                if error.status != 404:
                    raise
                # No VM: a standalone VMI.
                path = cluster.path("virtualmachineinstances", name, action)
                await cluster.request("PUT", path, body)
            return
        except SubresourceError as error:
            if error.status != 409 or _CHANGED_MEANWHILE not in str(error):
                raise
            if attempt < MAX_RETRIES:
                await asyncio.sleep(attempt * random.randint(0, 4) / 1000)
    raise SubresourceError(f"the VM kept changing: gave up after {MAX_RETRIES} retries")


def _warn_persist(args: argparse.Namespace) -> None:
    if args.persist:
        print(
            "virtctl: --persist is deprecated and has no effect: the volume is always "
            "added to the VM's spec",
            file=sys.stderr,
        )


async def _add(args: argparse.Namespace, body: Mapping[str, Any]) -> None:
    async with open_cluster(cluster_from_args(args)) as cluster:
        await _claim_exists(cluster, args.volume_name)
        await _submit(cluster, args.name, "addvolume", body)


async def _remove(args: argparse.Namespace, body: Mapping[str, Any]) -> None:
    async with open_cluster(cluster_from_args(args)) as cluster:
        await _submit(cluster, args.name, "removevolume", body)


def run_add(args: argparse.Namespace) -> int:
    """Plug the claim in; exit 1 with the reason (flags, the server's refusal) otherwise."""
    _warn_persist(args)
    try:
        body = _add_options(args)
    except ValueError as error:
        print(f"virtctl: error adding volume, {error}", file=sys.stderr)
        return 1
    try:
        asyncio.run(_add(args, body))
    except SubresourceError as error:
        print(f"virtctl: error adding volume, {error}", file=sys.stderr)
        return 1
    suffix = " (dry run)" if args.dry_run else ""
    print(
        f"Successfully submitted add volume request to VM {args.name} "
        f"for volume {args.volume_name}{suffix}"
    )
    return 0


def run_remove(args: argparse.Namespace) -> int:
    """Unplug the volume; exit 1 with the server's refusal otherwise."""
    _warn_persist(args)
    body = {"name": args.volume_name, **dry_run_body(args)}
    try:
        asyncio.run(_remove(args, body))
    except SubresourceError as error:
        print(f"virtctl: error removing volume, {error}", file=sys.stderr)
        return 1
    suffix = " (dry run)" if args.dry_run else ""
    print(
        f"Successfully submitted remove volume request to VM {args.name} "
        f"for volume {args.volume_name}{suffix}"
    )
    return 0
