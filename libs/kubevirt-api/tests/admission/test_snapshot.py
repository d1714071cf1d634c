"""VirtualMachineSnapshot and VirtualMachineRestore admission: the source and target kinds,
the policies, the patches, and specs fixed after creation, each cause naming its field."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from kubevirt_api.admission import validate_object, validate_restore, validate_snapshot


def snapshot(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "snapshot.kubevirt.io/v1beta1",
        "kind": "VirtualMachineSnapshot",
        "metadata": {"name": "snap", "namespace": "ns"},
        "spec": {"source": {"apiGroup": "kubevirt.io", "kind": "VirtualMachine", "name": "vm"}}
        | spec,
    }


def restore(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "snapshot.kubevirt.io/v1beta1",
        "kind": "VirtualMachineRestore",
        "metadata": {"name": "restore", "namespace": "ns"},
        "spec": {
            "target": {"apiGroup": "kubevirt.io", "kind": "VirtualMachine", "name": "vm"},
            "virtualMachineSnapshotName": "snap",
        }
        | spec,
    }


def fields(causes: list[Any]) -> list[str]:
    return [c.field for c in causes]


def test_a_snapshot_of_a_virtual_machine_is_admitted() -> None:
    assert validate_snapshot(snapshot()) == []
    assert validate_object(snapshot()) == []
    assert validate_snapshot(snapshot(deletionPolicy="Retain", failureDeadline="1m30s")) == []


@pytest.mark.parametrize(
    ("source", "field", "words"),
    [
        ({"kind": "VirtualMachine", "name": "vm"}, "spec.source.apiGroup", "missing apiGroup"),
        (
            {"apiGroup": "apps", "kind": "VirtualMachine", "name": "vm"},
            "spec.source.apiGroup",
            "only kubevirt.io",
        ),
        (
            {"apiGroup": "kubevirt.io", "kind": "VirtualMachineInstance", "name": "vm"},
            "spec.source.kind",
            "only VirtualMachine",
        ),
        ({"apiGroup": "kubevirt.io", "kind": "VirtualMachine"}, "spec.source.name", "required"),
    ],
)
def test_a_snapshot_source_must_be_a_named_kubevirt_vm(
    source: dict[str, Any], field: str, words: str
) -> None:
    causes = validate_snapshot(snapshot(source=source))
    assert fields(causes) == [field]
    assert words in causes[0].message


def test_snapshot_policies_and_deadline_are_checked() -> None:
    causes = validate_snapshot(snapshot(deletionPolicy="Keep", failureDeadline="soon"))
    assert fields(causes) == ["spec.deletionPolicy", "spec.failureDeadline"]
    assert "Delete, Retain" in causes[0].message


def test_a_snapshot_spec_cannot_change_but_its_metadata_can() -> None:
    old = snapshot()
    changed = snapshot(deletionPolicy="Retain")
    assert fields(validate_snapshot(changed, old)) == ["spec"]
    labelled = copy.deepcopy(old)
    labelled["metadata"]["labels"] = {"a": "b"}
    assert validate_snapshot(labelled, old) == []
    assert fields(validate_object(changed, operation="UPDATE", old=old)) == ["spec"]


def test_a_restore_names_a_vm_target_and_a_snapshot() -> None:
    assert validate_restore(restore()) == []
    causes = validate_restore(
        restore(
            target={"apiGroup": "kubevirt.io", "kind": "Pod", "name": "vm"},
            virtualMachineSnapshotName="",
            targetReadinessPolicy="Soon",
            volumeRestorePolicy="Somewhere",
        )
    )
    assert fields(causes) == [
        "spec.target.kind",
        "spec.virtualMachineSnapshotName",
        "spec.targetReadinessPolicy",
        "spec.volumeRestorePolicy",
    ]
    assert "StopTarget" in causes[2].message


def test_restore_patches_are_json_patch_operations_outside_the_status() -> None:
    good = json.dumps({"op": "replace", "path": "/metadata/name", "value": "copy"})
    assert validate_restore(restore(patches=[good])) == []
    causes = validate_restore(
        restore(
            patches=[
                "not json",
                json.dumps({"op": "move", "path": "/spec"}),
                json.dumps({"op": "add", "path": "/status/ready", "value": True}),
            ]
        )
    )
    assert fields(causes) == ["spec.patches[0]", "spec.patches[1]", "spec.patches[2]"]
    assert "status" in causes[2].message


def test_a_restore_spec_cannot_change() -> None:
    assert fields(validate_restore(restore(virtualMachineSnapshotName="other"), restore())) == [
        "spec"
    ]
