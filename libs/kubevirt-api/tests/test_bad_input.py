"""Bad input is refused with the field path and what would be valid, never a traceback."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from kubevirt_api import (
    FieldError,
    InvalidObjectError,
    VirtualMachine,
    VirtualMachineInstance,
    load,
    load_object,
)

VM: dict[str, Any] = {
    "apiVersion": "kubevirt.io/v1",
    "kind": "VirtualMachine",
    "metadata": {"name": "testvm"},
    "spec": {
        "runStrategy": "Always",
        "template": {
            "spec": {
                "domain": {
                    "cpu": {"cores": 2},
                    "devices": {"disks": [{"name": "root", "disk": {"bus": "virtio"}}]},
                    "resources": {"requests": {"memory": "1Gi"}},
                },
                "volumes": [{"name": "root", "containerDisk": {"image": "cirros"}}],
            }
        },
    },
}
DOMAIN = ("spec", "template", "spec", "domain")


def _with(path: tuple[str | int, ...], value: object) -> dict[str, Any]:
    doc = copy.deepcopy(VM)
    node: Any = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return doc


def _errors(doc: object) -> list[FieldError]:
    with pytest.raises(InvalidObjectError) as caught:
        load_object(doc)
    return list(caught.value.errors)


def test_the_base_object_is_valid() -> None:
    assert isinstance(load_object(VM), VirtualMachine)


@pytest.mark.parametrize(
    ("path", "value", "where", "says"),
    [
        (("spec", "runStrategy"), "Sometimes", "spec.runStrategy", "'Always', 'RerunOnFailure'"),
        (
            (*DOMAIN, "resources", "requests", "memory"),
            "1Gx",
            "spec.template.spec.domain.resources.requests.memory",
            "invalid quantity '1Gx'; expected a number with an optional suffix",
        ),
        (
            (*DOMAIN, "cpu", "cores"),
            -1,
            "spec.template.spec.domain.cpu.cores",
            "greater than or equal to 0",
        ),
        (
            (*DOMAIN, "cpu", "cores"),
            "two",
            "spec.template.spec.domain.cpu.cores",
            "expected an integer, got string",
        ),
        (
            (*DOMAIN, "devices"),
            ["disk"],
            "spec.template.spec.domain.devices",
            "expected an object, got list",
        ),
        (
            (*DOMAIN, "devices", "disks"),
            {"name": "root"},
            "spec.template.spec.domain.devices.disks",
            "expected a list, got object",
        ),
        (
            (*DOMAIN, "devices", "disks", 0, "disk", "bus"),
            "ide",
            "spec.template.spec.domain.devices.disks[0].disk.bus",
            "valid values: 'virtio', 'sata', 'scsi', 'usb'",
        ),
        (("spec", "running"), "yes", "spec.running", "expected a boolean"),
        (
            ("metadata", "labels"),
            {"kubevirt.io/os": 7},
            "metadata.labels[kubevirt.io/os]",
            "string",
        ),
        (
            ("spec", "template", "spec", "volumes", 0, "name"),
            None,
            "spec.template.spec.volumes[0].name",
            "null",
        ),
        (("spec", "template"), None, "spec.template", "must not be null"),
    ],
)
def test_bad_value_names_the_path(
    path: tuple[str | int, ...], value: object, where: str, says: str
) -> None:
    errors = _errors(_with(path, value))
    assert [e.path for e in errors] == [where]
    assert says in errors[0].message


def test_upstream_bounds_are_enforced() -> None:
    doc = copy.deepcopy(VM)
    spec = doc["spec"]["template"]["spec"]
    spec["volumes"] = [{"name": f"v{i}", "emptyDisk": {"capacity": "1Mi"}} for i in range(257)]
    assert _errors(doc) == [
        FieldError("spec.template.spec.volumes", "must have at most 256 items, got 257")
    ]
    policy = {
        "apiVersion": "migrations.kubevirt.io/v1alpha1",
        "kind": "MigrationPolicy",
        "metadata": {"name": "p"},
        "spec": {"maxDowntimeMs": 2000001, "selectors": {}},
    }
    assert [e.path for e in _errors(policy)] == ["spec.maxDowntimeMs"]


def test_missing_required_field() -> None:
    doc = copy.deepcopy(VM)
    del doc["spec"]["template"]["spec"]["volumes"][0]["name"]
    assert _errors(doc) == [
        FieldError("spec.template.spec.volumes[0].name", "required field is missing")
    ]


def test_every_problem_is_reported_at_once() -> None:
    doc = _with(("spec", "runStrategy"), "Sometimes")
    doc["spec"]["template"]["spec"]["domain"]["cpu"]["cores"] = -4
    assert len(_errors(doc)) == 2


@pytest.mark.parametrize("doc", [None, [], "vm", 3, {"kind": "VirtualMachine"}])
def test_not_an_object_of_a_known_kind(doc: object) -> None:
    assert _errors(doc)


def test_path_prefix_for_embedded_objects() -> None:
    with pytest.raises(InvalidObjectError) as caught:
        load(VirtualMachine, _with(("spec", "runStrategy"), 1), path="items[3]")
    assert caught.value.errors[0].path == "items[3].spec.runStrategy"
    assert str(caught.value).startswith("items[3].spec.runStrategy: expected a string")


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=10,
)
PLACES = [
    ("spec",),
    ("spec", "template", "spec"),
    DOMAIN,
    (*DOMAIN, "cpu"),
    (*DOMAIN, "devices", "disks"),
    (*DOMAIN, "devices", "disks", 0),
    (*DOMAIN, "resources", "requests"),
    ("spec", "template", "spec", "volumes", 0, "containerDisk"),
    ("metadata",),
]


@settings(max_examples=300, deadline=None)
@given(place=st.sampled_from(PLACES), value=JSON)
def test_garbage_anywhere_is_refused_or_accepted_but_never_crashes(
    place: tuple[str | int, ...], value: object
) -> None:
    errors: tuple[FieldError, ...] = ()
    try:
        load_object(_with(place, value))
    except InvalidObjectError as exc:
        errors = exc.errors or (FieldError("", ""),)
    assert all(isinstance(e.message, str) and e.message for e in errors)


def test_yaml_timestamps_become_rfc3339_strings() -> None:
    doc = yaml.safe_load(
        "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\n"
        "metadata: {name: t, creationTimestamp: 2024-05-01T10:00:00Z}\n"
        "spec: {domain: {devices: {}}}\n"
        "status: {conditions: [{type: Ready, status: 'True', lastTransitionTime: 2024-05-01 10:00:01}]}\n"
    )
    vmi = load(VirtualMachineInstance, doc)
    assert vmi.metadata is not None
    assert vmi.metadata.creation_timestamp == "2024-05-01T10:00:00Z"
    assert vmi.status is not None
    assert vmi.status.conditions is not None
    assert vmi.status.conditions[0].last_transition_time == "2024-05-01T10:00:01Z"


def test_a_known_kind_under_a_wrong_version_names_the_served_ones() -> None:
    assert _errors({**VM, "apiVersion": "kubevirt.io/v2"}) == [
        FieldError(
            "apiVersion",
            "VirtualMachine is not served as kubevirt.io/v2; "
            "use apiVersion kubevirt.io/v1 or kubevirt.io/v1alpha3",
        )
    ]


def test_deprecated_versions_load_into_the_same_models() -> None:
    assert isinstance(load_object({**VM, "apiVersion": "kubevirt.io/v1alpha3"}), VirtualMachine)
