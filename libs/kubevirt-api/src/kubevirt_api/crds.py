"""CustomResourceDefinitions (apiextensions.k8s.io/v1) generated from the typed models.

``uv run python -m kubevirt_api.crds`` writes ``manifests/crds/*.yaml``; ``--check``
exits 1 when the committed files differ from what generation produces now. Names,
versions, printer columns and subresources follow upstream KubeVirt; the
openAPIV3Schema is structural and built from the same dataclass fields the marshmallow
schemas are built from, so a model change shows up here.
"""

from __future__ import annotations

import functools
import json
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, dataclass, field
from enum import StrEnum
from importlib import resources
from pathlib import Path
from typing import Any, Final

import yaml

from kubevirt_api import generated_manifests
from kubevirt_api.codegen import CRD_ENUM_FIELDS
from kubevirt_api.intorstring import IntOrString
from kubevirt_api.kinds import KINDS, KindInfo
from kubevirt_api.model import FieldInfo, Model
from kubevirt_api.models.generated import Clock, DataVolumeTemplateSpec, ObjectMeta
from kubevirt_api.quantity import Quantity
from kubevirt_api.schemas import model_fields

__all__ = [
    "CRD_DIRECTORY",
    "SETTINGS",
    "CrdSettings",
    "PrinterColumn",
    "crd_for",
    "main",
    "open_api_schema",
    "render_all",
]

CRD_DIRECTORY: Final = Path("manifests/crds")

# Kubernetes' own pattern for a resource quantity in CRD schemas.
QUANTITY_PATTERN: Final = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|"
    r"([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)

# Objects upstream marks +kubebuilder:pruning:PreserveUnknownFields.
_PRESERVE_UNKNOWN: Final[frozenset[type[Model]]] = frozenset({Clock})

# Fields upstream marks +nullable (swagger.json does not carry the marker).
_NULLABLE: Final = frozenset(
    {
        ("v1.ChangedBlockTrackingStatus", "backupStatus"),
        ("v1.VirtualMachineStatus", "changedBlockTracking"),
        ("v1.VirtualMachineInstanceStatus", "changedBlockTracking"),
        ("v1.VirtualMachineStatus", "instancetypeRef"),
        ("v1.VirtualMachineStatus", "preferenceRef"),
        ("v1.VirtualMachineStatus", "memoryDumpRequest"),
        ("v1.VirtualMachineStatus", "startFailure"),
        ("v1.KubeVirtConfiguration", "changedBlockTrackingLabelSelectors"),
        ("v1.KubeVirtConfiguration", "commonInstancetypesDeployment"),
        ("v1.KubeVirtConfiguration", "confidentialCompute"),
        ("v1.KubeVirtConfiguration", "instancetype"),
        ("v1.KubeVirtConfiguration", "persistentReservationConfiguration"),
        ("v1.KubeVirtConfiguration", "virtTemplateDeployment"),
        ("v1.KubeVirtConfiguration", "vmRolloutStrategy"),
        ("v1.CommonInstancetypesDeployment", "enabled"),
        ("v1.PersistentReservationConfiguration", "enabled"),
        ("v1.VirtTemplateDeployment", "enabled"),
        ("v1.InstancetypeConfiguration", "referencePolicy"),
        ("v1.ConfidentialComputeConfiguration", "tdx"),
        ("v1.VirtualMachineInstanceMigrationState", "startTimestamp"),
        ("v1.VirtualMachineInstanceMigrationState", "endTimestamp"),
        ("v1.DataVolumeTemplateSpec", "status"),
        ("v1.VirtualMachineInstanceReplicaSet", "status"),
        ("v1alpha1.MigrationPolicy", "status"),
    }
)

# Fields upstream marks +structType=atomic where swagger.json does not say so.
_MAP_ATOMIC: Final = frozenset({("v1.Volume", "configMap")})

# Patterns upstream's CRDs carry (CDI's Percent type).
_PATTERNS: Final = {
    ("v1.PersistentVolumeClaimInfo", "filesystemOverhead"): r"^(0(?:\.\d{1,3})?|1)$"
}

_BOUND_KEYWORDS: Final = (
    ("minimum", "minimum"),
    ("maximum", "maximum"),
    ("max_items", "maxItems"),
    ("min_length", "minLength"),
    ("max_length", "maxLength"),
)

# Defaults and CEL rules upstream's CRDs carry (the API server applies them; our
# defaulting and admission mirror the rules where they matter).
_CRD_ONLY: Final[Mapping[tuple[str, str], Mapping[str, Any]]] = {
    ("k8s.io.api.core.v1.LocalObjectReference", "name"): {"default": ""},
    ("v1.ConfigMapVolumeSource", "name"): {"default": ""},
    ("v1.VirtualMachineStatus", "printableStatus"): {"default": "Stopped"},
    ("v1.TDXAttestationConfiguration", "enforced"): {"default": False},
    ("v1.TDXAttestationConfiguration", "qgsSocketPath"): {"default": "/var/run/tdx-qgs/qgs.socket"},
    ("v1.ContainerPathVolumeSource", "path"): {
        "x-kubernetes-validations": [
            {"message": "path must be absolute (start with '/')", "rule": "self.startsWith('/')"},
            {"message": "path must not contain '..'", "rule": "!self.contains('..')"},
        ]
    },
    ("v1.ContainerPathVolumeSource", "readOnly"): {
        "default": True,
        "x-kubernetes-validations": [
            {
                "message": "readOnly must be true; write access is not supported",
                "rule": "self == true",
            }
        ],
    },
}

# Objects upstream marks +nullable wherever they appear.
_NULLABLE_MODELS: Final[frozenset[type[Model]]] = frozenset({DataVolumeTemplateSpec})

_HEADER: Final = "# Generated by `uv run python -m kubevirt_api.crds`. DO NOT EDIT.\n"


@dataclass(frozen=True)
class PrinterColumn:
    """One ``additionalPrinterColumns`` entry."""

    name: str
    type: str
    json_path: str
    description: str | None = None
    priority: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The CRD form of the column."""
        out: dict[str, Any] = {"jsonPath": self.json_path, "name": self.name, "type": self.type}
        if self.description:
            out["description"] = self.description
        if self.priority is not None:
            out["priority"] = self.priority
        return out


@dataclass(frozen=True)
class CrdSettings:
    """What a CRD says beyond the schema (as upstream has it)."""

    columns: tuple[PrinterColumn, ...] = ()
    status: bool = False
    scale: bool = False
    categories: tuple[str, ...] = ("all",)
    deprecated: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=lambda: {"kubevirt.io": ""})
    conversion_none: bool = False


_AGE = PrinterColumn("Age", "date", ".metadata.creationTimestamp")
_PHASE = PrinterColumn("Phase", "string", ".status.phase")
_ERROR = PrinterColumn("Error", "string", ".status.error.message")
_CORE_DEPRECATED = {"v1alpha3": "kubevirt.io/v1alpha3 is deprecated; use kubevirt.io/v1"}


def _replica_columns(what: str) -> tuple[PrinterColumn, ...]:
    return (
        PrinterColumn("Desired", "integer", ".spec.replicas", f"Desired number of {what}"),
        PrinterColumn("Current", "integer", ".status.replicas", f"Current number of {what}"),
        PrinterColumn("Ready", "integer", ".status.readyReplicas", f"Number of ready {what}"),
        _AGE,
    )


def _ready(condition: str) -> str:
    return f".status.conditions[?(@.type=='{condition}')].status"


SETTINGS: Final[Mapping[str, CrdSettings]] = {
    "VirtualMachine": CrdSettings(
        columns=(
            _AGE,
            PrinterColumn("Status", "string", ".status.printableStatus", "Human readable status"),
            PrinterColumn("Ready", "string", _ready("Ready")),
        ),
        status=True,
        deprecated=_CORE_DEPRECATED,
    ),
    "VirtualMachineInstance": CrdSettings(
        columns=(
            _AGE,
            _PHASE,
            PrinterColumn("IP", "string", ".status.interfaces[0].ipAddress"),
            PrinterColumn("NodeName", "string", ".status.nodeName"),
            PrinterColumn("Ready", "string", _ready("Ready")),
            PrinterColumn("Live-Migratable", "string", _ready("LiveMigratable"), priority=1),
            PrinterColumn("Paused", "string", _ready("Paused"), priority=1),
        ),
        deprecated=_CORE_DEPRECATED,
    ),
    "VirtualMachineInstanceMigration": CrdSettings(
        columns=(
            PrinterColumn("Phase", "string", ".status.phase", "Phase of the migration"),
            PrinterColumn("VMI", "string", ".spec.vmiName", "Name of the migrated VMI"),
        ),
        status=True,
        deprecated=_CORE_DEPRECATED,
    ),
    "VirtualMachineInstanceReplicaSet": CrdSettings(
        columns=_replica_columns("VirtualMachineInstances"),
        status=True,
        scale=True,
        deprecated=_CORE_DEPRECATED,
    ),
    "VirtualMachineInstancePreset": CrdSettings(
        deprecated={
            "v1": "VirtualMachineInstancePresets are deprecated; use instancetypes and preferences",
            "v1alpha3": "VirtualMachineInstancePresets are deprecated; use instancetypes and preferences",
        },
    ),
    "KubeVirt": CrdSettings(
        columns=(_AGE, _PHASE),
        status=True,
        deprecated=_CORE_DEPRECATED,
        labels={"operator.kubevirt.io": ""},
    ),
    "VirtualMachineInstancetype": CrdSettings(conversion_none=True),
    "VirtualMachineClusterInstancetype": CrdSettings(categories=(), conversion_none=True),
    "VirtualMachinePreference": CrdSettings(conversion_none=True),
    "VirtualMachineClusterPreference": CrdSettings(categories=(), conversion_none=True),
    "MigrationPolicy": CrdSettings(status=True, categories=()),
    "VirtualMachinePool": CrdSettings(
        columns=_replica_columns("VirtualMachines"), status=True, scale=True
    ),
    "VirtualMachineSnapshot": CrdSettings(
        columns=(
            PrinterColumn("SourceKind", "string", ".spec.source.kind"),
            PrinterColumn("SourceName", "string", ".spec.source.name"),
            _PHASE,
            PrinterColumn("ReadyToUse", "boolean", ".status.readyToUse"),
            PrinterColumn("CreationTime", "date", ".status.creationTime"),
            _ERROR,
        ),
        status=True,
        conversion_none=True,
    ),
    "VirtualMachineSnapshotContent": CrdSettings(
        columns=(
            PrinterColumn("ReadyToUse", "boolean", ".status.readyToUse"),
            PrinterColumn("CreationTime", "date", ".status.creationTime"),
            _ERROR,
        ),
        status=True,
        conversion_none=True,
    ),
    "VirtualMachineRestore": CrdSettings(
        columns=(
            PrinterColumn("TargetKind", "string", ".spec.target.kind"),
            PrinterColumn("TargetName", "string", ".spec.target.name"),
            PrinterColumn("Complete", "boolean", ".status.complete"),
            PrinterColumn("RestoreTime", "date", ".status.restoreTime"),
            _ERROR,
        ),
        status=True,
        conversion_none=True,
    ),
    "VirtualMachineExport": CrdSettings(
        columns=(
            PrinterColumn("SourceKind", "string", ".spec.source.kind"),
            PrinterColumn("SourceName", "string", ".spec.source.name"),
            _PHASE,
        ),
        status=True,
        conversion_none=True,
    ),
}


@functools.cache
def _descriptions() -> dict[str, dict[str, str]]:
    text = resources.files("kubevirt_api.models").joinpath("descriptions.json").read_text()
    table: dict[str, dict[str, str]] = json.loads(text)
    return table


def _described(schema: dict[str, Any], description: str | None) -> dict[str, Any]:
    if not description:
        return schema
    return {"description": description, **{k: v for k, v in schema.items() if k != "description"}}


def _is_required(default: object, default_factory: object) -> bool:
    return default is MISSING and default_factory is MISSING


def _field_schema(annotation: Any, info: FieldInfo | None, owner: type[Model]) -> dict[str, Any]:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        (member,) = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _field_schema(member, info, owner)
    out: dict[str, Any]
    if origin is tuple:
        out = {"items": _field_schema(typing.get_args(annotation)[0], None, owner), "type": "array"}
        if info and info.list_type:
            out["x-kubernetes-list-type"] = info.list_type
        if info and info.list_map_keys:
            out["x-kubernetes-list-map-keys"] = list(info.list_map_keys)
    elif origin is Mapping or origin is dict:
        values = typing.get_args(annotation)[1]
        if values is Any:
            out = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        else:
            out = {"additionalProperties": _field_schema(values, None, owner), "type": "object"}
    elif annotation is Any:
        out = {"x-kubernetes-preserve-unknown-fields": True}
    elif annotation is Quantity:
        out = {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": QUANTITY_PATTERN,
            "x-kubernetes-int-or-string": True,
        }
    elif annotation is IntOrString:
        out = {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "x-kubernetes-int-or-string": True,
        }
    elif isinstance(annotation, type) and issubclass(annotation, StrEnum):
        out = {"type": "string"}
        # Only the enums upstream's CRDs carry; the other closed sets are enforced by
        # our schemas (virtctl validate, admission), as upstream does in its webhooks.
        if info is not None and (owner.swagger_name, info.json) in CRD_ENUM_FIELDS:
            out["enum"] = [member.value for member in annotation]
    elif isinstance(annotation, type) and issubclass(annotation, Model):
        if annotation is ObjectMeta:
            # Embedded metadata (templates) is kept as is, like upstream does.
            return {
                "nullable": True,
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": True,
            }
        out = _object_schema(annotation)
        if annotation in _NULLABLE_MODELS:
            out["nullable"] = True
    else:
        json_type = {str: "string", int: "integer", float: "number", bool: "boolean"}[annotation]
        out = {"type": json_type}
    if info is not None:
        out = _described(out, _descriptions().get(owner.swagger_name, {}).get(info.json))
        if info.crd_bounds:
            for option, keyword in _BOUND_KEYWORDS:
                if getattr(info, option) is not None:
                    out[keyword] = getattr(info, option)
        out.update(_CRD_ONLY.get((owner.swagger_name, info.json), {}))
        if info.format == "date-time":
            # Integer formats differ between swagger and upstream's CRDs; both say "integer".
            out["format"] = info.format
        if info.nullable or (owner.swagger_name, info.json) in _NULLABLE:
            out["nullable"] = True
        if (owner.swagger_name, info.json) in _PATTERNS:
            out["pattern"] = _PATTERNS[owner.swagger_name, info.json]
        if (owner.swagger_name, info.json) in _MAP_ATOMIC:
            out["x-kubernetes-map-type"] = "atomic"
    return out


def _object_schema(model: type[Model]) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    required: list[str] = []
    for f, info, annotation in model_fields(model):
        properties[info.json] = _field_schema(annotation, info, model)
        if _is_required(f.default, f.default_factory):
            required.append(info.json)
    out: dict[str, Any] = {"type": "object"}
    if properties:
        out["properties"] = properties
    if required:
        out["required"] = sorted(required)
    if model.swagger_map_type:
        out["x-kubernetes-map-type"] = model.swagger_map_type
    if model in _PRESERVE_UNKNOWN:
        out["x-kubernetes-preserve-unknown-fields"] = True
    return _described(out, _descriptions().get(model.swagger_name, {}).get(""))


def open_api_schema(model: type[Model]) -> dict[str, Any]:
    """The structural openAPIV3Schema of a top-level kind."""
    schema = _object_schema(model)
    # The API server owns metadata; a CRD may only say it is an object.
    schema["properties"]["metadata"] = {"type": "object"}
    return schema


def crd_for(kind: KindInfo) -> dict[str, Any]:
    """The CustomResourceDefinition of one kind."""
    settings = SETTINGS[kind.kind]
    schema = open_api_schema(kind.model)
    versions = []
    for name in sorted(kind.versions, key=lambda v: v != kind.storage_version):
        version: dict[str, Any] = {
            "name": name,
            "schema": {"openAPIV3Schema": schema},
            "served": True,
            "storage": name == kind.storage_version,
        }
        if name in settings.deprecated:
            version["deprecated"] = True
            version["deprecationWarning"] = settings.deprecated[name]
        if settings.columns:
            version["additionalPrinterColumns"] = [c.to_json() for c in settings.columns]
        subresources: dict[str, Any] = {}
        if settings.status:
            subresources["status"] = {}
        if settings.scale:
            subresources["scale"] = {
                "labelSelectorPath": ".status.labelSelector",
                "specReplicasPath": ".spec.replicas",
                "statusReplicasPath": ".status.replicas",
            }
        if subresources:
            version["subresources"] = subresources
        versions.append(version)
    names: dict[str, Any] = {"kind": kind.kind, "plural": kind.plural, "singular": kind.singular}
    if kind.short_names:
        names["shortNames"] = list(kind.short_names)
    if settings.categories:
        names["categories"] = list(settings.categories)
    spec: dict[str, Any] = {
        "group": kind.group,
        "names": names,
        "scope": "Namespaced" if kind.namespaced else "Cluster",
        "versions": versions,
    }
    if settings.conversion_none:
        spec["conversion"] = {"strategy": "None"}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"labels": dict(settings.labels), "name": f"{kind.plural}.{kind.group}"},
        "spec": spec,
    }


class _Dumper(yaml.SafeDumper):
    """Block style; never emits anchors/aliases (the versions share one schema object)."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _represent_str(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    # Multi-line descriptions read best as literal blocks, as in upstream's CRDs.
    style = "|" if "\n" in text else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_Dumper.add_representer(str, _represent_str)


def render_all() -> dict[str, str]:
    """File name -> YAML text of every CRD, plus a kustomization listing them."""
    files: dict[str, str] = {}
    for kind in KINDS:
        text = yaml.dump(
            crd_for(kind), Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=4096
        )
        files[f"{kind.plural}.{kind.group}.yaml"] = _HEADER + text
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": sorted(files),
    }
    files["kustomization.yaml"] = _HEADER + yaml.dump(
        kustomization, Dumper=_Dumper, sort_keys=False, default_flow_style=False
    )
    return files


def stale_files(directory: Path) -> list[str]:
    """Files in ``directory`` that are missing, different, or no longer generated."""
    return generated_manifests.stale_files(render_all(), directory)


def main(argv: Sequence[str] | None = None) -> int:
    """Command line entry: write the CRDs, or with ``--check`` report stale ones."""
    return generated_manifests.generator_main(
        argv,
        module="kubevirt_api.crds",
        description=__doc__,
        default_directory=CRD_DIRECTORY,
        render=render_all,
        what="CRDs",
    )


if __name__ == "__main__":
    raise SystemExit(main())
