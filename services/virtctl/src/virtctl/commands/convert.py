"""`virtctl convert -f FILE`: the libvirt domain XML virt-launcher would define, offline.

Each VirtualMachine (its template) or VirtualMachineInstance is defaulted the way the
cluster would (kubevirt_api.defaults) and converted by virt_domain's converter with
the same launcher layout the launcher uses. One object prints its XML alone; several
print one XML document each, preceded by an ``<!-- source: Kind/name -->`` comment.
Problems print as ``<file>: <Kind>/<name>: <field path>: <message>``, exit 1.
"""

from __future__ import annotations

import argparse
import sys
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from kubevirt_api import InvalidObjectError, VirtualMachineInstance, load
from kubevirt_api.defaults import DefaultingError, DefaultsConfig, vmi_defaults
from virt_domain import ConversionError, ConverterOptions, convert_to_xml, derived_firmware_uuid

from virtctl.commands.expanding import Refusal, expand_documents
from virtctl.commands.subresource import SubresourceError, add_cluster_flags, cluster_from_args
from virtctl.commands.validate import object_label
from virtctl.documents import Document, ReadError, read_documents

__all__ = ["ConvertFailure", "register", "run", "vmi_of"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
_GROUP = "kubevirt.io"
_CONVERTIBLE = (
    "VirtualMachine",
    "VirtualMachineInstance",
    "VirtualMachineInstanceReplicaSet",
    "VirtualMachinePool",
)
# Offline objects have no uid yet; a stable one keeps the preview deterministic.
_PREVIEW_UID_NAMESPACE = uuid.UUID("0b8f6f39-7c4e-4a5e-9d55-1bd3b5f0f1a5")


@dataclass(frozen=True)
class ConvertFailure:
    """Why one object could not be converted (field path may be empty)."""

    field: str
    message: str


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add ``convert`` to ``subparsers``."""
    parser = subparsers.add_parser(
        "convert",
        help="print the libvirt domain XML of a VM or VMI manifest (offline)",
        description=(
            "Convert VirtualMachine and VirtualMachineInstance manifests (and the first "
            "member of a VirtualMachinePool or VirtualMachineInstanceReplicaSet) into the "
            "exact libvirt domain XML virt-launcher would define, without a cluster. "
            "A VM naming an instancetype or preference is expanded first, with the "
            "instancetypes and preferences given in the same input (or --cluster). "
            "Objects of other kinds are skipped."
        ),
    )
    parser.add_argument(
        "-f",
        "--filename",
        action="append",
        required=True,
        metavar="FILE",
        help="a manifest file, a directory of them, or - for stdin (repeatable)",
    )
    parser.add_argument(
        "--cluster",
        action="store_true",
        help=(
            "read the instancetypes and preferences VMs name (and not given with -f) from "
            "the cluster of the kubeconfig"
        ),
    )
    parser.add_argument(
        "--emulation",
        action="store_true",
        help="software emulation (domain type qemu), as on nodes without usable KVM",
    )
    parser.add_argument(
        "--block-volume",
        action="append",
        default=[],
        metavar="VOLUME",
        help="a PVC/DataVolume volume that is a block device (repeatable)",
    )
    parser.add_argument(
        "--container-disk-format",
        action="append",
        default=[],
        metavar="VOLUME=FORMAT",
        help="image format of a containerDisk volume: raw or qcow2 (default qcow2)",
    )
    add_cluster_flags(parser)
    parser.set_defaults(run=run)


def _formats(pairs: list[str]) -> dict[str, Literal["raw", "qcow2"]] | str:
    """Parsed ``VOLUME=FORMAT`` pairs, or the message for the first bad one."""
    formats: dict[str, Literal["raw", "qcow2"]] = {}
    for pair in pairs:
        volume, _, kind = pair.partition("=")
        if not volume or kind not in ("raw", "qcow2"):
            return f"--container-disk-format {pair!r}: expected VOLUME=raw or VOLUME=qcow2"
        formats[volume] = "raw" if kind == "raw" else "qcow2"
    return formats


def _first_member(data: Mapping[str, Any]) -> tuple[Mapping[str, Any], str] | ConvertFailure:
    """A pool's first VM (``<pool>-0``) or a replica set's VMI, and the field prefix."""
    kind = data.get("kind")
    spec = data.get("spec")
    metadata = data.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    if not isinstance(spec, Mapping) or not isinstance(name, str):
        return ConvertFailure("spec", "required")
    key = "virtualMachineTemplate" if kind == "VirtualMachinePool" else "template"
    template = spec.get(key)
    if not isinstance(template, Mapping):
        return ConvertFailure(f"spec.{key}", "required: the template of the members")
    member_meta: dict[str, Any] = dict(template.get("metadata") or {})
    pool = kind == "VirtualMachinePool"
    member_meta["name"] = f"{name}-0" if pool else name
    assert isinstance(metadata, Mapping)
    member_meta["namespace"] = metadata.get("namespace")
    member: dict[str, Any] = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine" if pool else "VirtualMachineInstance",
        "metadata": member_meta,
        "spec": template.get("spec"),
    }
    return member, f"spec.{key}."


def vmi_of(data: Mapping[str, Any], namespace: str) -> VirtualMachineInstance | ConvertFailure:
    """The defaulted VMI a VM or VMI manifest would run as, or why it cannot be built.

    Pools and replica sets give their first member (``<pool>-0``; the set's own name).
    """
    kind = data.get("kind")
    if kind in ("VirtualMachinePool", "VirtualMachineInstanceReplicaSet"):
        member = _first_member(data)
        if isinstance(member, ConvertFailure):
            return member
        result = vmi_of(member[0], namespace)
        if isinstance(result, ConvertFailure) and result.field.startswith(("spec", "metadata")):
            return ConvertFailure(member[1] + result.field, result.message)
        return result
    metadata = data.get("metadata") if isinstance(data.get("metadata"), Mapping) else {}
    assert isinstance(metadata, Mapping)
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        return ConvertFailure("metadata.name", "required: the domain is named after it")
    namespace = str(metadata.get("namespace") or namespace)
    prefix = ""
    if kind == "VirtualMachine":
        spec = data.get("spec")
        if not isinstance(spec, Mapping):
            return ConvertFailure("spec", "required")
        for field in ("instancetype", "preference"):
            if spec.get(field):
                return ConvertFailure(
                    f"spec.{field}",
                    f"the {field} must be expanded first: give it with -f or read it with --cluster",
                )
        template = spec.get("template")
        if not isinstance(template, Mapping):
            return ConvertFailure("spec.template", "required: the VMI the VM runs")
        template_meta = template.get("metadata")
        raw: dict[str, Any] = {
            "apiVersion": "kubevirt.io/v1",
            "kind": "VirtualMachineInstance",
            "metadata": {**(template_meta if isinstance(template_meta, Mapping) else {})},
            "spec": template.get("spec"),
        }
        prefix = "spec.template."
    else:
        raw = dict(data)
        raw["metadata"] = dict(metadata)
    meta: dict[str, Any] = raw["metadata"]
    meta["name"], meta["namespace"] = name, namespace
    meta.setdefault("uid", str(uuid.uuid5(_PREVIEW_UID_NAMESPACE, f"{namespace}/{name}")))
    raw.pop("status", None)
    try:
        # The VM controller derives a missing firmware UUID from the name; do the same.
        defaulted = vmi_defaults(
            raw, DefaultsConfig(), new_uuid=lambda: derived_firmware_uuid(name)
        )
        defaulted.pop("status", None)
        return load(VirtualMachineInstance, defaulted)
    except InvalidObjectError as exc:
        first = exc.errors[0]
        path = str(first.path)
        return ConvertFailure(
            f"{prefix}{path}" if path.startswith("spec") else path, str(first.message)
        )
    except DefaultingError as exc:
        return ConvertFailure(f"{prefix}spec", str(exc))


def run(args: argparse.Namespace) -> int:
    """Convert every VM/VMI of every source; print XML to stdout, problems to stderr."""
    formats = _formats(args.container_disk_format)
    if isinstance(formats, str):
        print(f"virtctl convert: {formats}", file=sys.stderr)
        return EXIT_USAGE
    options = ConverterOptions(
        use_emulation=args.emulation,
        block_volumes=frozenset(args.block_volume),
        container_disk_formats=formats,
    )
    outputs: list[tuple[str, str]] = []
    failed = 0
    namespace = args.namespace or "default"
    items = list(read_documents(args.filename))
    try:
        expanded = expand_documents(
            items, args.namespace, cluster_from_args(args) if args.cluster else None
        )
    except SubresourceError as error:
        print(f"virtctl convert: {error}", file=sys.stderr)
        return EXIT_FAILED
    for position, item in enumerate(items):
        if isinstance(item, ReadError):
            print(f"virtctl convert: {item}", file=sys.stderr)
            failed += 1
            continue
        if not _convertible(item):
            continue
        assert isinstance(item.data, Mapping)
        label = object_label(item)
        data = expanded.get(position, item.data)
        result = (
            ConvertFailure(data.field, data.message)
            if isinstance(data, Refusal)
            else _convert_one(data, namespace, options)
        )
        if isinstance(result, ConvertFailure):
            where = f"{result.field}: " if result.field else ""
            print(f"{item.source}: {label}: {where}{result.message}", file=sys.stderr)
            failed += 1
        else:
            outputs.append((f"{item.source}: {label}", result))
    if not outputs and not failed:
        print(
            "virtctl convert: no VirtualMachine, VirtualMachineInstance, pool or replica set in the input",
            file=sys.stderr,
        )
        return EXIT_FAILED
    for position, (label, xml) in enumerate(outputs):
        if len(outputs) > 1:
            if position:
                print()
            print(f"<!-- source: {label} -->")
        print(xml)
    return EXIT_FAILED if failed else EXIT_OK


def _convertible(doc: Document) -> bool:
    data = doc.data
    return (
        isinstance(data, Mapping)
        and str(data.get("apiVersion", "")).split("/")[0].endswith(_GROUP)
        and data.get("kind") in _CONVERTIBLE
    )


def _convert_one(
    data: Mapping[str, Any], namespace: str, options: ConverterOptions
) -> str | ConvertFailure:
    vmi = vmi_of(data, namespace)
    if isinstance(vmi, ConvertFailure):
        return vmi
    prefix = {
        "VirtualMachine": "spec.template.",
        "VirtualMachinePool": "spec.virtualMachineTemplate.spec.template.",
        "VirtualMachineInstanceReplicaSet": "spec.template.",
    }.get(str(data.get("kind")), "")
    try:
        return convert_to_xml(vmi, options)
    except ConversionError as exc:
        field = exc.field
        return ConvertFailure(
            f"{prefix}{field}" if field.startswith("spec") else field, exc.message
        )
