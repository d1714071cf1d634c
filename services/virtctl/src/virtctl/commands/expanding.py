"""VMs with an instancetype or preference expanded offline, for ``virtctl convert``.

The instancetypes and preferences come from the same input documents, or (``--cluster``)
from the cluster; kubevirt_api.instancetypes does the expansion virt-api's expand-spec does.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kube_runtime import get_or_none
from kubevirt_api.defaults import DefaultingError, DefaultsConfig
from kubevirt_api.instancetypes import (
    ConflictError,
    Getter,
    NotFoundError,
    UnknownKindError,
    expand_vm,
    find_specs,
)
from kubevirt_api.resources import CONTROLLER_REVISIONS, Resource

from virtctl.commands.subresource import ClusterFlags, open_cluster
from virtctl.documents import Document, ReadError

__all__ = ["Refusal", "expand_documents"]

_GROUP = "instancetype.kubevirt.io"
_KINDS = (
    "VirtualMachineInstancetype",
    "VirtualMachineClusterInstancetype",
    "VirtualMachinePreference",
    "VirtualMachineClusterPreference",
)
_Key = tuple[str, str | None, str]


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a VM could not be expanded: the field and upstream's message."""

    field: str
    message: str


def _given(items: Sequence[Document | ReadError], namespace: str) -> dict[_Key, Mapping[str, Any]]:
    """The instancetypes and preferences in the input, by (plural, namespace, name)."""
    given: dict[_Key, Mapping[str, Any]] = {}
    for item in items:
        data = item.data if isinstance(item, Document) else None
        if not isinstance(data, Mapping) or data.get("kind") not in _KINDS:
            continue
        if not str(data.get("apiVersion", "")).startswith(f"{_GROUP}/"):
            continue
        meta = data.get("metadata") if isinstance(data.get("metadata"), Mapping) else {}
        assert isinstance(meta, Mapping)
        cluster = "Cluster" in str(data["kind"])
        plural = str(data["kind"]).lower() + "s"
        given[
            (
                plural,
                None if cluster else str(meta.get("namespace") or namespace),
                str(meta.get("name")),
            )
        ] = data
    return given


def _named_vms(items: Sequence[Document | ReadError]) -> dict[int, Mapping[str, Any]]:
    out: dict[int, Mapping[str, Any]] = {}
    for position, item in enumerate(items):
        data = item.data if isinstance(item, Document) else None
        if not isinstance(data, Mapping) or data.get("kind") != "VirtualMachine":
            continue
        spec = data.get("spec")
        if isinstance(spec, Mapping) and (spec.get("instancetype") or spec.get("preference")):
            out[position] = data
    return out


async def _expand_all(
    items: Sequence[Document | ReadError],
    vms: dict[int, Mapping[str, Any]],
    namespace: str | None,
    flags: ClusterFlags | None,
) -> dict[int, Mapping[str, Any] | Refusal]:
    async with contextlib.AsyncExitStack() as stack:
        cluster = await stack.enter_async_context(open_cluster(flags)) if flags else None
        # Objects that name no namespace are in -n's, else the context's (offline: default).
        default_ns = namespace or (cluster.namespace if cluster else "default")
        given = _given(items, default_ns)

        async def get(resource: Resource, name: str, ns: str | None) -> Mapping[str, Any] | None:
            found = given.get((resource.plural, ns, name))
            if found is not None or cluster is None:
                return found
            return await get_or_none(cluster.client, resource, name, ns)

        getter: Getter = get
        out: dict[int, Mapping[str, Any] | Refusal] = {}
        for position, vm in vms.items():
            meta = dict(vm.get("metadata") or {})
            meta["namespace"] = meta.get("namespace") or default_ns
            # Offline there are no revisions: the VM's own status refs are not followed.
            named = (
                {**vm, "metadata": meta, "status": {}}
                if cluster is None
                else {**vm, "metadata": meta}
            )
            try:
                specs = await find_specs(getter, named)
                out[position] = expand_vm(
                    named, specs.instancetype, specs.preference, DefaultsConfig()
                )
            except NotFoundError as error:
                field = "spec.preference" if error.preference else "spec.instancetype"
                if str(error).startswith(CONTROLLER_REVISIONS.plural):
                    field += ".revisionName"
                hint = "" if cluster else "; give it with -f or read it with --cluster"
                out[position] = Refusal(field, f"{error}{hint}")
            except UnknownKindError as error:
                field = "spec.preference" if "Preference" in str(error) else "spec.instancetype"
                out[position] = Refusal(f"{field}.kind", str(error))
            except ConflictError as error:
                out[position] = Refusal(error.conflicts[0].path, str(error))
            except DefaultingError as error:
                out[position] = Refusal("spec.template.spec", str(error))
        return out


def expand_documents(
    items: Sequence[Document | ReadError], namespace: str | None, flags: ClusterFlags | None
) -> dict[int, Mapping[str, Any] | Refusal]:
    """The expanded VM (or why not) of every input VM naming an instancetype or preference,
    by position. Raises SubresourceError when the cluster cannot be read."""
    vms = _named_vms(items)
    if not vms:
        return {}
    return asyncio.run(_expand_all(items, vms, namespace, flags))
