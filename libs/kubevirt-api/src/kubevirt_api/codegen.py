"""Generate the typed models from upstream's swagger.json.

Run ``uv run python -m kubevirt_api.codegen`` from the repository root to rewrite
``models/generated.py`` and ``models/descriptions.json``; ``--check`` exits 1 when a
committed file is stale.
The output is deterministic: classes sorted by name, fields sorted by JSON key.
"""

from __future__ import annotations

import argparse
import json
import keyword
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

__all__ = [
    "CLASS_RENAMES",
    "CRD_ENUM_FIELDS",
    "ENUM_FIELDS",
    "ROOTS",
    "SPECIAL_REFS",
    "class_name",
    "closure",
    "descriptions_path",
    "find_swagger",
    "generated_path",
    "main",
    "python_name",
    "render",
    "render_all",
    "render_descriptions",
]

SWAGGER_RELATIVE: Final = Path("compat/upstream-kubevirt/openapi/swagger.json")

# The kinds we serve; everything they reference is generated too.
ROOTS: Final = (
    "v1.VirtualMachine",
    "v1.VirtualMachineInstance",
    "v1.VirtualMachineInstanceMigration",
    "v1.VirtualMachineInstanceReplicaSet",
    "v1.VirtualMachineInstancePreset",
    "v1.KubeVirt",
    "v1beta1.VirtualMachineInstancetype",
    "v1beta1.VirtualMachineClusterInstancetype",
    "v1beta1.VirtualMachinePreference",
    "v1beta1.VirtualMachineClusterPreference",
    "v1alpha1.MigrationPolicy",
    "v1beta1.VirtualMachinePool",
    "v1beta1.VirtualMachineSnapshot",
    "v1beta1.VirtualMachineSnapshotContent",
    "v1beta1.VirtualMachineRestore",
    "v1.VirtualMachineExport",
)

# swagger definitions implemented by hand (or as plain JSON types).
SPECIAL_REFS: Final = {
    "k8s.io.apimachinery.pkg.api.resource.Quantity": "Quantity",
    "k8s.io.apimachinery.pkg.util.intstr.IntOrString": "IntOrString",
    "k8s.io.apimachinery.pkg.apis.meta.v1.Time": "str",
    "k8s.io.apimachinery.pkg.apis.meta.v1.Duration": "str",
    "k8s.io.apimachinery.pkg.apis.meta.v1.FieldsV1": "Mapping[str, Any]",
    "k8s.io.apimachinery.pkg.runtime.RawExtension": "Mapping[str, Any]",
}

# Short names that clash between swagger's groups.
CLASS_RENAMES: Final = {
    "v1beta1.DataVolumeSource": "CDIDataVolumeSource",
    "k8s.io.api.core.v1.PersistentVolumeClaimVolumeSource": "CorePersistentVolumeClaimVolumeSource",
    # snapshot.kubevirt.io's and export.kubevirt.io's own types.
    "v1beta1.Condition": "SnapshotCondition",
    "v1.Condition": "ExportCondition",
    "v1beta1.VirtualMachine": "SnapshotVirtualMachine",
    "v1beta1.VolumeSnapshotStatus": "ContentVolumeSnapshotStatus",
    "v1beta1.PersistentVolumeClaim": "SnapshotPersistentVolumeClaim",
}

# Enumerations swagger.json does not spell out (values come from upstream's Go constants
# and admission rules). Swagger's own enums are matched to enums.py by their values.
ENUM_FIELDS: Final = {
    ("v1.VirtualMachineSpec", "runStrategy"): "RunStrategy",
    ("v1.VirtualMachineSpec", "updateVolumesStrategy"): "UpdateVolumesStrategy",
    ("v1.VirtualMachineInstanceStatus", "phase"): "VirtualMachineInstancePhase",
    ("v1.VirtualMachineInstanceSpec", "evictionStrategy"): "EvictionStrategy",
    ("v1.KubeVirtConfiguration", "evictionStrategy"): "EvictionStrategy",
    ("v1.DiskTarget", "bus"): "DiskBus",
    ("v1.LunTarget", "bus"): "DiskBus",
    ("v1.CDRomTarget", "bus"): "DiskBus",
    ("v1.Disk", "cache"): "DiskCache",
    ("v1.Disk", "io"): "DiskIO",
    ("v1.Disk", "errorPolicy"): "DiskErrorPolicy",
    ("v1.DomainSpec", "ioThreadsPolicy"): "IOThreadsPolicy",
    ("v1.Input", "bus"): "InputBus",
    ("v1.Input", "type"): "InputType",
    ("v1.I6300ESBWatchdog", "action"): "WatchdogAction",
    ("v1.Port", "protocol"): "PortProtocol",
}

# Enumerations upstream's CRDs enforce too (kubebuilder markers); they go into our CRDs.
CRD_ENUM_FIELDS: Final = {
    ("v1.DomainSpec", "rebootPolicy"): "RebootPolicy",
    ("v1.ReservedOverhead", "memLock"): "MemLockRequirement",
    ("v1.ExperimentalMigrationOptions", "compression"): "MigrationCompression",
    ("v1beta1.DataVolumeSpec", "contentType"): "DataVolumeContentType",
    ("v1beta1.VirtualMachinePoolSelectionPolicy", "sortPolicy"): "PoolSortPolicy",
    (
        "v1beta1.VirtualMachinePoolOpportunisticScaleInStrategy",
        "statePreservation",
    ): "StatePreservation",
    (
        "v1beta1.VirtualMachinePoolProactiveScaleInStrategy",
        "statePreservation",
    ): "StatePreservation",
    ("v1.KubeVirtConfiguration", "vmRolloutStrategy"): "VMRolloutStrategy",
    ("v1.HypervisorConfiguration", "name"): "HypervisorName",
    ("v1.TLSConfiguration", "minTLSVersion"): "TLSProtocolVersion",
    ("v1.KubeVirtConfiguration", "roleAggregationStrategy"): "RoleAggregationStrategy",
    ("v1.InstancetypeConfiguration", "referencePolicy"): "InstancetypeReferencePolicy",
}

_SWAGGER_ENUMS: Final = {
    frozenset({"ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"}): "DNSPolicy",
    frozenset({"Always", "IfNotPresent", "Never"}): "PullPolicy",
    frozenset({"BestEffort", "Burstable", "Guaranteed"}): "QOSClass",
    frozenset({"ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"}): "AccessMode",
    frozenset({"Block", "Filesystem", "FromStorageProfile"}): "PersistentVolumeMode",
    frozenset({"HTTP", "HTTPS"}): "URIScheme",
    frozenset({"DoesNotExist", "Exists", "Gt", "In", "Lt", "NotIn"}): "NodeSelectorOperator",
    frozenset({"Equal", "Exists"}): "TolerationOperator",
    frozenset({"NoExecute", "NoSchedule", "PreferNoSchedule"}): "TaintEffect",
    frozenset({"Honor", "Ignore"}): "TopologySpreadPolicy",
    frozenset({"DoNotSchedule", "ScheduleAnyway"}): "UnsatisfiableConstraintAction",
}

# Counts that cannot be negative (upstream: unsigned Go types or admission rules).
_MINIMUMS: Final = {
    "replicas": 0,
    "cores": 0,
    "sockets": 0,
    "threads": 0,
    "maxSockets": 0,
    "bootOrder": 1,
    "terminationGracePeriodSeconds": 0,
    "initialDelaySeconds": 0,
    "timeoutSeconds": 0,
    "periodSeconds": 0,
    "successThreshold": 0,
    "failureThreshold": 0,
    "queues": 0,
}

# Bounds upstream's CRDs enforce (kubebuilder markers swagger.json does not carry);
# our schemas enforce them and our CRDs carry them.
_BOUNDS: Final[Mapping[tuple[str, str], Mapping[str, int]]] = {
    ("v1.VirtualMachineInstanceSpec", "accessCredentials"): {"max_items": 256},
    ("v1.VirtualMachineInstanceSpec", "networks"): {"max_items": 256},
    ("v1.VirtualMachineInstanceSpec", "utilityVolumes"): {"max_items": 256},
    ("v1.VirtualMachineInstanceSpec", "volumes"): {"max_items": 256},
    ("v1.Devices", "disks"): {"max_items": 256},
    ("v1.Devices", "interfaces"): {"max_items": 256},
    ("v1.KubeVirtConfiguration", "hypervisors"): {"max_items": 1},
    ("v1.ContainerPathVolumeSource", "path"): {"max_length": 4096},
    ("v1.DeveloperConfiguration", "memoryOvercommit"): {"minimum": 10},
    ("v1.MigrationConfiguration", "maxDowntimeMs"): {"minimum": 1, "maximum": 2000000},
    ("v1.VMIMConfigurationOptions", "maxDowntimeMs"): {"minimum": 1, "maximum": 2000000},
    ("v1alpha1.MigrationPolicySpec", "maxDowntimeMs"): {"minimum": 1, "maximum": 2000000},
    ("v1.ContainerDiskInfo", "checksum"): {"minimum": 0, "maximum": 4294967295},
    ("v1.InitrdInfo", "checksum"): {"minimum": 0, "maximum": 4294967295},
    ("v1.KernelInfo", "checksum"): {"minimum": 0, "maximum": 4294967295},
    ("v1.VirtualMachineInstanceStatus", "VSOCKCID"): {"minimum": 0, "maximum": 4294967295},
    ("v1.CustomizeComponentsPatch", "resourceName"): {"min_length": 1},
    ("v1.CustomizeComponentsPatch", "resourceType"): {"min_length": 1},
    ("v1beta1.VirtualMachinePoolAutohealingStrategy", "startUpFailureThreshold"): {"minimum": 1},
    ("v1beta1.VirtualMachinePoolSpec", "replicas"): {"minimum": 0},
    ("v1.DowntimeTuningOptions", "cooldownSeconds"): {"minimum": 1},
    ("v1.DowntimeTuningOptions", "initialMs"): {"minimum": 1},
    ("v1.DowntimeTuningOptions", "startAfterIteration"): {"minimum": 1},
    ("v1.DowntimeTuningOptions", "steps"): {"minimum": 1},
    ("v1.StallDetectorOptions", "stallMargin"): {"minimum": 0, "maximum": 100},
    ("v1.StallDetectorOptions", "stallProgressTimeout"): {"minimum": 0},
    ("v1.StallDetectorOptions", "switchoverTimeout"): {"minimum": 0},
    ("v1beta1.MemoryInstancetype", "overcommitPercent"): {"minimum": 0, "maximum": 100},
}

# camelCase keys whose mechanical snake_case reads badly.
_NAME_OVERRIDES: Final = {
    "vmIPv6NetworkCIDR": "vm_ipv6_network_cidr",
    "VSOCKCID": "vsock_cid",
    "serverAddressByClientCIDRs": "server_address_by_client_cidrs",
    "lastFailedVMIUID": "last_failed_vmi_uid",
    "newSMBiosSerial": "new_smbios_serial",
    "matchSELinuxLevelOnMigration": "match_selinux_level_on_migration",
    "seLinuxLauncherType": "selinux_launcher_type",
    "seLinuxOptions": "selinux_options",
}

_REF = "#/definitions/"


def python_name(json_key: str) -> str:
    """The snake_case attribute name for a JSON key (keywords get a trailing underscore)."""
    name = _NAME_OVERRIDES.get(json_key)
    if name is None:
        name = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", json_key)
        name = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()
    if keyword.iskeyword(name) or name == "extra":
        name += "_"
    return name


def class_name(definition: str) -> str:
    """The Python class name of a swagger definition."""
    return CLASS_RENAMES.get(definition, definition.rsplit(".", 1)[-1])


def closure(definitions: Mapping[str, Any], roots: Sequence[str] = ROOTS) -> list[str]:
    """Every definition reachable from ``roots`` (special ones excluded), sorted."""
    seen: set[str] = set()
    pending = list(roots)
    while pending:
        name = pending.pop()
        if name in seen or name in SPECIAL_REFS:
            continue
        seen.add(name)
        pending.extend(re.findall(r'"#/definitions/([^"]+)"', json.dumps(definitions[name])))
    return sorted(seen, key=class_name)


def _type(definition: str, key: str, schema: Mapping[str, Any], item: bool = False) -> str:
    enum = ENUM_FIELDS.get((definition, key)) or CRD_ENUM_FIELDS.get((definition, key))
    if enum is not None and not (item and schema.get("type") == "array"):
        return enum
    if "enum" in schema:
        return _SWAGGER_ENUMS[frozenset(schema["enum"])]
    ref = schema.get("$ref")
    if ref is not None:
        target = ref.removeprefix(_REF)
        return SPECIAL_REFS.get(target) or class_name(target)
    kind = schema.get("type")
    if isinstance(kind, list):
        if sorted(kind) == ["null", "string"]:
            return "str"
        if sorted(kind) == ["number", "string"]:
            return "IntOrString"
        raise ValueError(f"{definition}.{key}: unsupported type {kind}")
    if kind == "string":
        return "str"
    if kind == "integer":
        return "int"
    if kind == "number":
        return "float"
    if kind == "boolean":
        return "bool"
    if kind == "array":
        return f"tuple[{_type(definition, key, schema['items'], item=True)}, ...]"
    if kind == "object":
        values = schema.get("additionalProperties")
        if values is None:
            return "Mapping[str, Any]"
        return f"Mapping[str, {_type(definition, key, values, item=True)}]"
    raise ValueError(f"{definition}.{key}: unsupported schema {schema}")


def _metadata(definition: str, key: str, annotation: str, schema: Mapping[str, Any]) -> str:
    args = [f'"{key}"']
    bounds = dict(_BOUNDS.get((definition, key), {}))
    minimum = _MINIMUMS.get(key) if annotation == "int" else None
    if annotation == "Quantity":
        minimum = 0
    if minimum is not None:
        bounds.setdefault("minimum", minimum)
    for option in ("minimum", "maximum", "max_items", "min_length", "max_length"):
        if option in bounds:
            args.append(f"{option}={bounds[option]}")
    if (definition, key) in _BOUNDS:
        args.append("crd_bounds=True")
    ref = schema.get("$ref", "").removeprefix(_REF)
    fmt = schema.get("format")
    nullable = False
    if isinstance(schema.get("type"), list) and "null" in schema["type"]:
        # Only condition timestamps are typed string-or-null in swagger.
        fmt, nullable = "date-time", True
    if ref == "k8s.io.apimachinery.pkg.apis.meta.v1.Time":
        fmt = "date-time"
    if fmt is not None:
        args.append(f'format="{fmt}"')
    if nullable:
        args.append("nullable=True")
    if "x-kubernetes-list-type" in schema:
        args.append(f'list_type="{schema["x-kubernetes-list-type"]}"')
    if "x-kubernetes-list-map-keys" in schema:
        keys = ", ".join(f'"{k}"' for k in schema["x-kubernetes-list-map-keys"])
        args.append(f"list_map_keys=({keys},)")
    return f"prop({', '.join(args)})"


def _docstring(description: str, fallback: str) -> str:
    text = " ".join(description.split()) or fallback
    sentence = re.split(r"(?<=[a-z0-9)])\. ", text, maxsplit=1)[0].rstrip(".")
    if len(sentence) > 90:
        sentence = sentence[:87].rsplit(" ", 1)[0] + " ..."
    sentence = sentence.replace("\\", "\\\\").replace('"""', "'''")
    return sentence[0].upper() + sentence[1:] + "."


def render(swagger: Mapping[str, Any]) -> str:
    """The source of ``models/generated.py`` for the given swagger document."""
    definitions: Mapping[str, Any] = swagger["definitions"]
    names = closure(definitions)
    by_class = {class_name(n): n for n in names}
    if len(by_class) != len(names):
        raise ValueError("two swagger definitions map to one class name; extend CLASS_RENAMES")
    for definition, key in [*ENUM_FIELDS, *CRD_ENUM_FIELDS, *_BOUNDS]:
        if key not in definitions[definition].get("properties", {}):
            raise ValueError(f"ENUM_FIELDS names a missing field {definition}.{key}")
    enums_used: set[str] = set()
    blocks: list[str] = []
    for name in names:
        schema = definitions[name]
        cls = class_name(name)
        required = set(schema.get("required", ()))
        lines = [
            # Equality, hash and repr are Model's (written once, not exec'd per class).
            "@dataclass(frozen=True, kw_only=True, eq=False, repr=False)",
            f"class {cls}(Model):",
            f'    """{_docstring(schema.get("description", ""), cls)}"""',
            "",
            f'    swagger_name: ClassVar[str] = "{name}"',
        ]
        if schema.get("nullable"):
            lines.append("    swagger_nullable: ClassVar[bool] = True")
        if "x-kubernetes-map-type" in schema:
            lines.append(
                f'    swagger_map_type: ClassVar[str | None] = "{schema["x-kubernetes-map-type"]}"'
            )
        for key in sorted(schema.get("properties", {})):
            prop_schema = schema["properties"][key]
            annotation = _type(name, key, prop_schema)
            enums_used.update(re.findall(r"\b([A-Z][A-Za-z]+)\b", annotation))
            meta = _metadata(name, key, annotation, prop_schema)
            if key in required:
                lines.append(f"    {python_name(key)}: {annotation} = field(metadata={meta})")
            else:
                lines.append(
                    f"    {python_name(key)}: {annotation} | None = field(default=None, metadata={meta})"
                )
        blocks.append("\n".join(lines))
    from kubevirt_api import enums

    enum_imports = sorted(e for e in enums_used if e in enums.__all__)
    header = [
        "# Code generated by kubevirt_api.codegen from compat/upstream-kubevirt/openapi/swagger.json.",
        "# DO NOT EDIT: change codegen.py and run `uv run python -m kubevirt_api.codegen`.",
        '"""Typed models of the kubevirt.io kinds and everything they contain (generated)."""',
        "",
        "from __future__ import annotations",
        "",
        "from collections.abc import Mapping",
        "from dataclasses import dataclass, field",
        "from typing import Any, ClassVar",
        "",
        f"from kubevirt_api.enums import {', '.join(enum_imports)}",
        "from kubevirt_api.intorstring import IntOrString",
        "from kubevirt_api.model import Model, prop",
        "from kubevirt_api.quantity import Quantity",
        "",
        "__all__ = [",
        *[f'    "{class_name(n)}",' for n in names],
        "]",
    ]
    return "\n".join(header) + "\n\n\n" + "\n\n\n".join(blocks) + "\n"


def find_swagger(start: Path | None = None) -> Path:
    """Locate the vendored swagger.json by walking up from ``start`` (default: this file)."""
    here = (start or Path(__file__)).resolve()
    for parent in [here, *here.parents]:
        candidate = parent / SWAGGER_RELATIVE
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"{SWAGGER_RELATIVE} not found above {here}")


def generated_path() -> Path:
    """Where the generated models live."""
    return Path(__file__).resolve().parent / "models" / "generated.py"


def render_descriptions(swagger: Mapping[str, Any]) -> str:
    """``models/descriptions.json``: swagger's descriptions of every generated definition
    (``""`` is the type's own), which the CRDs carry for ``kubectl explain``."""
    definitions: Mapping[str, Any] = swagger["definitions"]
    table: dict[str, dict[str, str]] = {}
    for name in closure(definitions):
        schema = definitions[name]
        entry = {"": schema.get("description", "")}
        for key, prop_schema in schema.get("properties", {}).items():
            entry[key] = prop_schema.get("description", "")
        table[name] = {k: v for k, v in entry.items() if v}
    return json.dumps(table, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def render_all(swagger: Mapping[str, Any]) -> dict[Path, str]:
    """Every generated file and its content."""
    return {
        generated_path(): render(swagger),
        descriptions_path(): render_descriptions(swagger),
    }


def descriptions_path() -> Path:
    """Where the generated descriptions live."""
    return Path(__file__).resolve().parent / "models" / "descriptions.json"


def main(argv: Sequence[str] | None = None) -> int:
    """Command line entry: regenerate, or with ``--check`` report staleness."""
    parser = argparse.ArgumentParser(prog="python -m kubevirt_api.codegen", description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 if a file is stale")
    args = parser.parse_args(argv)
    files = render_all(json.loads(find_swagger().read_text()))
    if args.check:
        stale = [str(p) for p, text in files.items() if not p.is_file() or p.read_text() != text]
        if stale:
            print(
                f"stale: {', '.join(stale)}; run `uv run python -m kubevirt_api.codegen`",
                file=sys.stderr,
            )
            return 1
        return 0
    for path, text in files.items():
        path.write_text(text)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
