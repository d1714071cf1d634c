"""Generated CRDs: names, versions, columns and subresources as upstream; structural schemas."""

from __future__ import annotations

from typing import Any

import pytest
from kubevirt_api import KINDS
from kubevirt_api.crds import crd_for, open_api_schema
from kubevirt_api.kinds import KindInfo

BY_KIND = {kind.kind: kind for kind in KINDS}


def _crd(kind: str) -> dict[str, Any]:
    return crd_for(BY_KIND[kind])


@pytest.mark.parametrize(
    ("kind", "short", "status", "scale", "scope"),
    [
        ("VirtualMachine", ["vm", "vms"], True, False, "Namespaced"),
        ("VirtualMachineInstance", ["vmi", "vmis"], False, False, "Namespaced"),
        ("VirtualMachineInstanceMigration", ["vmim", "vmims"], True, False, "Namespaced"),
        ("VirtualMachineInstanceReplicaSet", ["vmirs", "vmirss"], True, True, "Namespaced"),
        ("VirtualMachineInstancePreset", ["vmipreset", "vmipresets"], False, False, "Namespaced"),
        ("KubeVirt", ["kv", "kvs"], True, False, "Namespaced"),
        ("VirtualMachinePool", ["vmpool", "vmpools"], True, True, "Namespaced"),
        (
            "VirtualMachineClusterInstancetype",
            ["vmclusterinstancetype", "vmclusterinstancetypes", "vmcf", "vmcfs"],
            False,
            False,
            "Cluster",
        ),
        (
            "VirtualMachinePreference",
            ["vmpref", "vmprefs", "vmp", "vmps"],
            False,
            False,
            "Namespaced",
        ),
        ("MigrationPolicy", None, True, False, "Cluster"),
    ],
)
def test_names_scope_and_subresources(
    kind: str, short: list[str] | None, status: bool, scale: bool, scope: str
) -> None:
    crd = _crd(kind)
    assert crd["spec"]["names"].get("shortNames") == short
    assert crd["spec"]["scope"] == scope
    for version in crd["spec"]["versions"]:
        subresources = version.get("subresources", {})
        assert ("status" in subresources) == status
        assert ("scale" in subresources) == scale
        if scale:
            assert subresources["scale"]["labelSelectorPath"] == ".status.labelSelector"


def test_core_kinds_serve_v1_and_deprecated_v1alpha3() -> None:
    versions = _crd("VirtualMachine")["spec"]["versions"]
    assert [
        (v["name"], v["served"], v["storage"], v.get("deprecated", False)) for v in versions
    ] == [
        ("v1", True, True, False),
        ("v1alpha3", True, False, True),
    ]
    assert "categories" in _crd("VirtualMachine")["spec"]["names"]


def test_printer_columns_of_the_vmi() -> None:
    (v1, _) = _crd("VirtualMachineInstance")["spec"]["versions"]
    columns = [
        (c["name"], c["jsonPath"], c.get("priority")) for c in v1["additionalPrinterColumns"]
    ]
    assert columns == [
        ("Age", ".metadata.creationTimestamp", None),
        ("Phase", ".status.phase", None),
        ("IP", ".status.interfaces[0].ipAddress", None),
        ("NodeName", ".status.nodeName", None),
        ("Ready", ".status.conditions[?(@.type=='Ready')].status", None),
        ("Live-Migratable", ".status.conditions[?(@.type=='LiveMigratable')].status", 1),
        ("Paused", ".status.conditions[?(@.type=='Paused')].status", 1),
    ]


def _check_structural(schema: dict[str, Any], path: str, problems: list[str]) -> None:
    """The rules of a structural schema that a generator could get wrong."""
    preserve = schema.get("x-kubernetes-preserve-unknown-fields") is True
    int_or_string = schema.get("x-kubernetes-int-or-string") is True
    if "type" not in schema and not (preserve or int_or_string):
        problems.append(f"{path}: no type")
    if int_or_string and schema.get("anyOf") != [{"type": "integer"}, {"type": "string"}]:
        problems.append(f"{path}: int-or-string without the anyOf pair")
    if "properties" in schema and "additionalProperties" in schema:
        problems.append(f"{path}: properties beside additionalProperties")
    if schema.get("additionalProperties") is False or schema.get("default", 0) is None:
        problems.append(f"{path}: additionalProperties false or null default")
    for key, sub in schema.get("properties", {}).items():
        _check_structural(sub, f"{path}.{key}", problems)
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            _check_structural(schema[key], f"{path}.{key}", problems)


@pytest.mark.parametrize("kind", KINDS, ids=[k.kind for k in KINDS])
def test_schemas_are_structural(kind: KindInfo) -> None:
    problems: list[str] = []
    _check_structural(open_api_schema(kind.model), kind.kind, problems)
    assert problems == []


def test_schema_shapes() -> None:
    vmi = open_api_schema(BY_KIND["VirtualMachineInstance"].model)
    domain = vmi["properties"]["spec"]["properties"]["domain"]
    memory = domain["properties"]["resources"]["properties"]["requests"]["additionalProperties"]
    assert memory["x-kubernetes-int-or-string"] is True
    assert "pattern" in memory
    assert domain["required"] == ["devices"]
    assert vmi["properties"]["metadata"] == {"type": "object"}
    vm = open_api_schema(BY_KIND["VirtualMachine"].model)
    template_meta = vm["properties"]["spec"]["properties"]["template"]["properties"]["metadata"]
    assert template_meta["x-kubernetes-preserve-unknown-fields"] is True
    reboot = domain["properties"]["rebootPolicy"]
    assert reboot["enum"] == ["Reboot", "Terminate"]


def test_upstream_bounds_defaults_and_rules_are_carried() -> None:
    vmi = open_api_schema(BY_KIND["VirtualMachineInstance"].model)["properties"]["spec"]
    assert vmi["properties"]["volumes"]["maxItems"] == 256
    volume = vmi["properties"]["volumes"]["items"]["properties"]
    assert volume["containerPath"]["properties"]["readOnly"]["default"] is True
    assert len(volume["containerPath"]["properties"]["path"]["x-kubernetes-validations"]) == 2
    # Our own stricter minimums (cores >= 0) stay out of the CRD, as upstream has none there.
    cpu = vmi["properties"]["domain"]["properties"]["cpu"]["properties"]["cores"]
    assert "minimum" not in cpu
