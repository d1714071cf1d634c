"""`virtctl migrate-cancel`: cancel a VM's live migration by deleting its active
VirtualMachineInstanceMigration (upstream's way: the migration controller aborts it)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from kube_runtime import ApiError
from kubevirt_api.enums import FINAL_MIGRATION_PHASES
from kubevirt_api.migrations import MIGRATION_SELECTOR_LABEL
from kubevirt_api.resources import VIRTUAL_MACHINE_INSTANCE_MIGRATIONS

from virtctl.commands.subresource import (
    ClusterFlags,
    SubresourceError,
    add_cluster_flags,
    cluster_from_args,
    open_cluster,
)

__all__ = ["cancel_migration", "register", "run"]


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add ``migrate-cancel`` to ``subparsers``."""
    parser = subparsers.add_parser("migrate-cancel", help="cancel migration of a virtual machine")
    parser.add_argument("name", metavar="VM", help="the VirtualMachine whose migration to cancel")
    parser.add_argument(
        "--dry-run", action="store_true", help="show what would happen; change nothing"
    )
    add_cluster_flags(parser)
    parser.set_defaults(run=run)


async def cancel_migration(flags: ClusterFlags, vmi: str, *, dry_run: bool = False) -> str:
    """Delete the unfinished migration of `vmi` (found by its selector label); its name."""
    async with open_cluster(flags) as cluster:
        resource = VIRTUAL_MACHINE_INSTANCE_MIGRATIONS
        try:
            listed = await cluster.client.list(
                resource, cluster.namespace, label_selector=f"{MIGRATION_SELECTOR_LABEL}=={vmi}"
            )
        except ApiError as error:
            raise SubresourceError(
                f"Error fetching virtual machine instance migration list {error}"
            ) from None
        for migration in listed.get("items") or ():
            if ((migration.get("status") or {}).get("phase") or "") in FINAL_MIGRATION_PHASES:
                continue
            name = str(migration["metadata"]["name"])
            try:
                await cluster.client.delete(resource, name, cluster.namespace, dry_run=dry_run)
            except ApiError as error:
                raise SubresourceError(
                    f"Error canceling migration {name} of a VirtualMachine {vmi}: {error}"
                ) from None
            return name
    raise SubresourceError(f"Found no migration to cancel for {vmi}")


def run(args: argparse.Namespace) -> int:
    """Cancel the migration; exit 1 with the reason when there is none or it fails."""
    try:
        asyncio.run(cancel_migration(cluster_from_args(args), args.name, dry_run=args.dry_run))
    except SubresourceError as error:
        print(f"virtctl: {error}", file=sys.stderr)
        return 1
    suffix = " (dry run)" if args.dry_run else ""
    print(f"VM {args.name} was scheduled to migrate-cancel{suffix}")
    return 0
