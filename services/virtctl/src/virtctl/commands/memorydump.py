"""`virtctl memory-dump get|download|remove VM`: a VM's memory dumped into a claim, as
upstream's pkg/virtctl/memorydump.

get VM [--claim-name=X [--create-claim [--storage-class=SC] [--access-mode=MODE]]]
remove VM

`get` asks virt-api's `memorydump` subresource (virt-controller and virt-handler then
write the dump onto the claim); with `--create-claim` it first creates a claim large
enough for the VMI's memory. `download` (and `get --output`) would read the dump back
through a VirtualMachineExport, but this export server serves disk images only, not the
files of a claim, so both are refused with a message saying where the dump is. The
download flags are accepted as upstream's, so scripts parse.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Mapping
from typing import Any

import aiohttp
from kube_runtime import (
    PERSISTENT_VOLUME_CLAIMS,
    VIRTUAL_MACHINE_INSTANCES,
    VIRTUAL_MACHINES,
    ApiError,
    Resource,
)
from kubevirt_api.memorydump import DEFAULT_FS_OVERHEAD, expected_claim_bytes
from kubevirt_api.quantity import Quantity, QuantityError

from virtctl.commands.subresource import (
    Cluster,
    SubresourceError,
    add_cluster_flags,
    cluster_from_args,
    open_cluster,
)

__all__ = ["ACCESS_MODES", "ACTIONS", "APPLY_STORAGE_PROFILE", "register", "run"]

ACTIONS = ("get", "download", "remove")
#: The modes a dump claim may be created with (upstream's; ReadOnlyMany cannot be written).
ACCESS_MODES = ("ReadWriteOnce", "ReadWriteMany")
#: Asks CDI (where it runs) to complete the claim from the storage class's profile.
APPLY_STORAGE_PROFILE = "cdi.kubevirt.io/applyStorageProfile"

_EXAMPLES = """\
examples:
  # Dump the memory of VM 'myvm' to the existing claim 'memoryvolume':
  virtctl memory-dump get myvm --claim-name=memoryvolume
  # Create the claim 'memoryvolume' first, sized for the VM's memory:
  virtctl memory-dump get myvm --claim-name=memoryvolume --create-claim
  # Dump again to the claim already associated with the VM:
  virtctl memory-dump get myvm
  # Remove the association (to dump to another claim):
  virtctl memory-dump remove myvm
"""


class MemoryDumpError(Exception):
    """A refusal fit for the user (upstream's words where it has them)."""


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add ``memory-dump`` to ``subparsers``."""
    parser = subparsers.add_parser(
        "memory-dump",
        help="dump the memory of a running VM to a pvc",
        epilog=_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("action", choices=ACTIONS, help="get, download or remove")
    parser.add_argument("name", metavar="VM", help="the VirtualMachine")
    parser.add_argument("--claim-name", default="", help="pvc name to contain the memory dump")
    parser.add_argument(
        "--create-claim",
        action="store_true",
        help="create the pvc that will contain the memory dump",
    )
    parser.add_argument("--storage-class", default="", help="the storage class for the PVC")
    parser.add_argument(
        "--access-mode",
        default="",
        help="the access mode for the PVC: ReadWriteOnce (default) or ReadWriteMany",
    )
    download = parser.add_argument_group("download (not supported by this virtctl yet)")
    download.add_argument(
        "--output", default="", help="the output path of the memory dump to be downloaded"
    )
    download.add_argument(
        "--port-forward", action="store_true", help="download through a local port-forward"
    )
    download.add_argument("--format", default="", help="gzip or raw")
    download.add_argument("--local-port", default="0", help="the port-forward's local port")
    add_cluster_flags(parser)
    parser.set_defaults(run=run)


def _download_unsupported(args: argparse.Namespace) -> str:
    claim = f"claim {args.claim_name}" if args.claim_name else "the claim in its status"
    return (
        "downloading a memory dump is not supported by this virtctl yet: its export server "
        "serves disk images only, not the files of a claim. The dump is written to the VM's "
        f"memory dump claim ({claim}; see status.memoryDumpRequest.fileName): run "
        "`memory-dump get` without --output, then read the file from the claim"
    )


def _check_flags(args: argparse.Namespace) -> None:
    """Refuse what cannot work before anything is changed in the cluster."""
    if args.action == "remove":
        return  # upstream's remove reads no flag
    if args.action == "download" or args.output:
        raise MemoryDumpError(_download_unsupported(args))
    if args.access_mode == "ReadOnlyMany":
        raise MemoryDumpError(
            "cannot dump memory to a readonly pvc, use either ReadWriteOnce or "
            "ReadWriteMany if supported"
        )
    if args.access_mode and args.access_mode not in ACCESS_MODES:
        raise MemoryDumpError(
            "invalid access mode, use either ReadWriteOnce or ReadWriteMany if supported"
        )
    if args.create_claim and not args.claim_name:
        raise MemoryDumpError("missing claim name")


async def _read(cluster: Cluster, resource: Resource, name: str) -> Mapping[str, Any] | None:
    """The object, None when absent; the API server's refusal as MemoryDumpError."""
    try:
        found = await cluster.client.get(resource, name, cluster.namespace)
    except ApiError as error:
        if error.not_found:
            return None
        raise MemoryDumpError(error.message) from None
    return found if isinstance(found, Mapping) else {}


def _memory_request(vmi: Mapping[str, Any]) -> int:
    spec = vmi.get("spec") or {}
    requests = ((spec.get("domain") or {}).get("resources") or {}).get("requests") or {}
    try:
        return Quantity.parse(requests.get("memory") or 0).to_int()
    except QuantityError as error:
        raise MemoryDumpError(f"the VMI's memory request is not a quantity: {error}") from None


def _claim_body(
    namespace: str, name: str, size_bytes: int, storage_class: str, access_mode: str
) -> dict[str, Any]:
    """The dump claim upstream's virtctl creates (RWO unless asked, Filesystem mode)."""
    spec: dict[str, Any] = {
        "accessModes": [access_mode or "ReadWriteOnce"],
        # The size is aligned to 1 MiB, so binary notation is exact.
        "resources": {"requests": {"storage": str(Quantity.from_value(size_bytes, binary=True))}},
    }
    if storage_class:
        spec["storageClassName"] = storage_class
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {APPLY_STORAGE_PROFILE: "true"},
        },
        "spec": spec,
    }


async def _create_claim(cluster: Cluster, args: argparse.Namespace) -> None:
    """upstream's createPVCforMemoryDump: no association yet, no such claim yet, then a
    claim sized for the VMI's memory request."""
    ns, claim = cluster.namespace, args.claim_name
    vm = await _read(cluster, VIRTUAL_MACHINES, args.name)
    if vm is None:
        raise MemoryDumpError(f'virtualmachines.kubevirt.io "{args.name}" not found')
    if (vm.get("status") or {}).get("memoryDumpRequest") is not None:
        raise MemoryDumpError(
            "please remove current memory dump association before creating a new claim "
            "for a new memory dump"
        )
    if await _read(cluster, PERSISTENT_VOLUME_CLAIMS, claim) is not None:
        raise MemoryDumpError(
            f"PVC {ns}/{claim} already exists, check if it should be created if not "
            "remove create flag"
        )
    vmi = await _read(cluster, VIRTUAL_MACHINE_INSTANCES, args.name)
    if vmi is None:
        raise MemoryDumpError(f'virtualmachineinstances.kubevirt.io "{args.name}" not found')
    size = expected_claim_bytes(_memory_request(vmi))
    # No CDI here, so no CDIConfig to read the overhead from (upstream's fallback).
    print(f"Using default {DEFAULT_FS_OVERHEAD * 100:g}% filesystem overhead for pvc size")
    body = _claim_body(ns, claim, size, args.storage_class, args.access_mode)
    try:
        await cluster.client.create(PERSISTENT_VOLUME_CLAIMS, body, ns)
    except ApiError as error:
        raise MemoryDumpError(error.message) from None
    print(f"PVC {ns}/{claim} created")


async def _get(args: argparse.Namespace) -> None:
    async with open_cluster(cluster_from_args(args)) as cluster:
        if args.create_claim:
            await _create_claim(cluster, args)
        path = cluster.path("virtualmachines", args.name, "memorydump")
        try:
            await cluster.request("PUT", path, {"claimName": args.claim_name})
        except SubresourceError as error:
            raise MemoryDumpError(f"error dumping vm memory, {error}") from None
    print(f"Successfully submitted memory dump request of VM {args.name}")


async def _remove(args: argparse.Namespace) -> None:
    async with open_cluster(cluster_from_args(args)) as cluster:
        path = cluster.path("virtualmachines", args.name, "removememorydump")
        try:
            await cluster.request("PUT", path, None)
        except SubresourceError as error:
            raise MemoryDumpError(f"error removing memory dump association, {error}") from None
    print(f"Successfully submitted remove memory dump association of VM {args.name}")


def run(args: argparse.Namespace) -> int:
    """Run the action; exit 1 with the reason (a flag, the cluster's refusal) otherwise."""
    try:
        _check_flags(args)
        asyncio.run(_remove(args) if args.action == "remove" else _get(args))
    except (MemoryDumpError, SubresourceError) as error:
        print(f"virtctl: {error}", file=sys.stderr)
        return 1
    except (aiohttp.ClientError, OSError, TimeoutError) as error:
        print(f"virtctl: cannot reach the cluster: {error}", file=sys.stderr)
        return 1
    return 0
