"""Revisions (names, labels, stripped data), matchers, and expand."""

from __future__ import annotations

from typing import Any

import pytest
from kubevirt_api.defaults import DefaultsConfig
from kubevirt_api.instancetypes import (
    ConflictError,
    UnknownKindError,
    controller_revision,
    expand_vm,
    instancetype_matcher,
    preference_matcher,
    revision_spec,
    same_revision_data,
    set_matcher_annotations,
    synced_status_ref,
)

VM: dict[str, Any] = {
    "apiVersion": "kubevirt.io/v1",
    "kind": "VirtualMachine",
    "metadata": {"name": "vm1", "namespace": "ns", "uid": "vm-uid"},
    "spec": {
        "instancetype": {"name": "u1.small"},
        "preference": {"name": "fedora", "kind": "VirtualMachinePreference"},
        "template": {
            "spec": {
                "domain": {"devices": {}},
                "volumes": [{"name": "root", "containerDisk": {"image": "x:1"}}],
            }
        },
    },
    "status": {"instancetypeRef": {"name": "u1.small"}},
}
ITYPE: dict[str, Any] = {
    "apiVersion": "instancetype.kubevirt.io/v1beta1",
    "kind": "VirtualMachineClusterInstancetype",
    "metadata": {
        "name": "u1.small",
        "uid": "it-uid",
        "generation": 3,
        "resourceVersion": "77",
        "labels": {"l": "v"},
        "annotations": {"a": "v"},
        "finalizers": ["f"],
        "ownerReferences": [{"name": "o"}],
        "managedFields": [{"manager": "m"}],
    },
    "spec": {"cpu": {"guest": 1}, "memory": {"guest": "2Gi"}},
}


def test_a_revision_has_upstreams_name_owner_labels_and_stripped_data() -> None:
    revision = controller_revision(VM, ITYPE)
    meta = revision["metadata"]
    assert meta["name"] == "vm1-u1.small-v1beta1-it-uid-3"
    assert meta["namespace"] == "ns"
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "kubevirt.io/v1",
            "kind": "VirtualMachine",
            "name": "vm1",
            "uid": "vm-uid",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert meta["labels"] == {
        "instancetype.kubevirt.io/object-generation": "3",
        "instancetype.kubevirt.io/object-kind": "VirtualMachineClusterInstancetype",
        "instancetype.kubevirt.io/object-name": "u1.small",
        "instancetype.kubevirt.io/object-uid": "it-uid",
        "instancetype.kubevirt.io/object-version": "v1beta1",
    }
    assert revision["data"]["metadata"] == {
        "name": "u1.small",
        "uid": "it-uid",
        "generation": 3,
        "resourceVersion": "77",
    }
    assert revision_spec(revision) == ITYPE["spec"]
    assert ITYPE["metadata"]["labels"] == {"l": "v"}  # the input is untouched


def test_revisions_compare_by_spec() -> None:
    a = controller_revision(VM, ITYPE)
    b = controller_revision(VM, {**ITYPE, "metadata": {"name": "u1.small", "uid": "x"}})
    c = controller_revision(VM, {**ITYPE, "spec": {"cpu": {"guest": 2}}})
    assert same_revision_data(a, b)
    assert not same_revision_data(a, c)


def test_matcher_kinds_default_to_the_cluster_kinds() -> None:
    itype = instancetype_matcher(VM)
    pref = preference_matcher(VM)
    assert itype is not None
    assert itype.cluster
    assert itype.resource.plural == "virtualmachineclusterinstancetypes"
    assert pref is not None
    assert not pref.cluster
    assert pref.resource.plural == "virtualmachinepreferences"
    annotations: dict[str, Any] = {}
    set_matcher_annotations(VM, annotations)
    assert annotations == {
        "kubevirt.io/cluster-instancetype-name": "u1.small",
        "kubevirt.io/preference-name": "fedora",
    }
    with pytest.raises(UnknownKindError, match="unexpected kind in InstancetypeMatcher: Pod"):
        instancetype_matcher({"spec": {"instancetype": {"name": "x", "kind": "Pod"}}})


def test_status_refs_follow_the_matcher() -> None:
    matcher = instancetype_matcher(VM)
    assert matcher is not None
    kept = {"name": "u1.small", "controllerRevisionRef": {"name": "r1"}}
    assert synced_status_ref(matcher, kept) == kept
    renamed = {"name": "u1.medium", "controllerRevisionRef": {"name": "r1"}}
    assert synced_status_ref(matcher, renamed) == {"name": "u1.small"}
    pinned = instancetype_matcher(
        {"spec": {"instancetype": {"name": "u1.small", "revisionName": "r9"}}}
    )
    assert pinned is not None
    assert synced_status_ref(pinned, None) == {
        "name": "u1.small",
        "controllerRevisionRef": {"name": "r9"},
    }


def test_expand_applies_defaults_and_clears_matchers_and_refs() -> None:
    expanded = expand_vm(
        VM, ITYPE["spec"], {"devices": {"preferredDiskBus": "virtio"}}, DefaultsConfig()
    )
    assert "instancetype" not in expanded["spec"]
    assert "preference" not in expanded["spec"]
    assert "instancetypeRef" not in expanded["status"]
    spec = expanded["spec"]["template"]["spec"]
    assert spec["domain"]["cpu"] == {"sockets": 1, "cores": 1, "threads": 1}
    assert spec["domain"]["memory"] == {"guest": "2Gi"}
    # The volume's default disk exists before the preference applies, so it gets its bus.
    assert spec["domain"]["devices"]["disks"] == [{"name": "root", "disk": {"bus": "virtio"}}]
    assert spec["networks"] == [{"name": "default", "pod": {}}]
    assert spec["domain"]["machine"] == {"type": "q35"}
    assert VM["spec"]["instancetype"] == {"name": "u1.small"}


def test_expand_refuses_a_conflict_with_its_path() -> None:
    vm = {
        **VM,
        "spec": {**VM["spec"], "template": {"spec": {"domain": {"memory": {"guest": "1Gi"}}}}},
    }
    with pytest.raises(ConflictError) as raised:
        expand_vm(vm, ITYPE["spec"], None, DefaultsConfig())
    assert str(raised.value) == (
        "VM field(s) spec.template.spec.domain.memory.guest conflicts with selected instance type"
    )
    assert [c.path for c in raised.value.conflicts] == ["spec.template.spec.domain.memory.guest"]


def test_a_vm_without_matchers_is_returned_unchanged() -> None:
    vm: dict[str, Any] = {"spec": {"template": {"spec": {"domain": {}}}}}
    assert expand_vm(vm, None, None, DefaultsConfig()) == vm
