"""VM, replica set, pool, migration, instancetype, preference, policy, status, VMI update."""

from __future__ import annotations

import copy
from typing import Any

from kubevirt_api.admission import (
    ClusterConfig,
    validate_instancetype,
    validate_migration_create,
    validate_migration_policy,
    validate_migration_update,
    validate_object,
    validate_pool,
    validate_preference,
    validate_replicaset,
    validate_status_update,
    validate_vm,
    validate_vmi_update,
)


def test_vm_running_xor_run_strategy(vm: dict[str, Any]) -> None:
    vm["spec"]["running"] = True
    causes = validate_vm(vm, ClusterConfig())
    assert [c.field for c in causes] == ["spec.running"]
    assert "mutually exclusive" in causes[0].message


def test_vm_template_errors_carry_template_path(vm: dict[str, Any]) -> None:
    vm["spec"]["runStrategy"] = "Sometimes"
    vm["spec"]["template"]["spec"]["domain"]["devices"]["disks"][0]["disk"]["bus"] = "ide"
    got = {c.field for c in validate_vm(vm, ClusterConfig())}
    assert got == {"spec.runStrategy", "spec.template.spec.domain.devices.disks[0].disk.bus"}


def test_vm_data_volume_templates_are_refused_naming_cdi(vm: dict[str, Any]) -> None:
    vm["spec"]["dataVolumeTemplates"] = [
        {"metadata": {"name": "a"}, "spec": {"source": {"blank": {}}}},
        {"metadata": {}, "spec": {}},
    ]
    causes = validate_vm(vm, ClusterConfig())
    assert [c.field for c in causes] == [
        "spec.dataVolumeTemplates[0]",
        "spec.dataVolumeTemplates[1]",
    ]
    assert all("CDI" in c.message for c in causes)


def test_replicaset_selector_must_match(vm: dict[str, Any]) -> None:
    rs = {
        "spec": {
            "selector": {"matchLabels": {"app": "a"}},
            "template": {
                "metadata": {"labels": {"app": "b"}},
                "spec": vm["spec"]["template"]["spec"],
            },
        }
    }
    assert [c.field for c in validate_replicaset(rs, ClusterConfig())] == ["spec.selector"]
    rs["spec"]["template"]["metadata"]["labels"]["app"] = "a"
    assert validate_replicaset(rs, ClusterConfig()) == []


def test_an_invalid_selector_operator_is_named(vm: dict[str, Any]) -> None:
    pool = {
        "spec": {
            "selector": {"matchExpressions": [{"key": "app", "operator": "Near"}]},
            "virtualMachineTemplate": {"metadata": {"labels": {"app": "a"}}, "spec": vm["spec"]},
        }
    }
    (cause,) = validate_pool(pool, ClusterConfig())
    assert cause.field == "spec.selector.matchExpressions[0].operator"
    assert "valid: In, NotIn, Exists, DoesNotExist" in cause.message


def test_pool_validates_vm_template(vm: dict[str, Any]) -> None:
    spec = copy.deepcopy(vm["spec"])
    spec["running"] = False
    pool = {
        "spec": {
            "selector": {"matchLabels": {"app": "a"}},
            "virtualMachineTemplate": {"metadata": {"labels": {"app": "a"}}, "spec": spec},
        }
    }
    fields = [c.field for c in validate_pool(pool, ClusterConfig())]
    assert fields == ["spec.virtualMachineTemplate.spec.running"]


def test_migration_create_and_update() -> None:
    assert [c.field for c in validate_migration_create({"spec": {}})] == ["spec.vmiName"]
    old = {"spec": {"vmiName": "a"}}
    assert validate_migration_update({"spec": {"vmiName": "b"}}, old)[0].field == "spec"


def test_instancetype_and_preference() -> None:
    got = {c.field for c in validate_instancetype({"spec": {"cpu": {"guest": 0}, "memory": {}}})}
    assert got == {"spec.cpu.guest", "spec.memory.guest"}
    bad = validate_preference({"spec": {"cpu": {"preferredCPUTopology": "diagonal"}}})
    assert bad[0].field == "spec.cpu.preferredCPUTopology"


def test_migration_policy_bandwidth() -> None:
    causes = validate_migration_policy({"spec": {"bandwidthPerMigration": "-1Mi"}})
    assert causes[0].field == "spec.bandwidthPerMigration"


def test_status_update_keeps_spec_and_valid_actions() -> None:
    old = {"spec": {"runStrategy": "Manual"}, "status": {}}
    new = {
        "spec": {"runStrategy": "Always"},
        "status": {"stateChangeRequests": [{"action": "Boom"}]},
    }
    got = {c.field for c in validate_status_update("VirtualMachine", new, old)}
    assert got == {"spec", "status.stateChangeRequests[0].action"}


def test_vmi_spec_is_immutable_for_users(vmi: dict[str, Any]) -> None:
    new = copy.deepcopy(vmi)
    new["spec"]["hostname"] = "changed"
    assert validate_vmi_update(new, vmi)[0].field == "spec"
    assert validate_vmi_update(new, vmi, trusted=True) == []


def test_unknown_kind_is_named() -> None:
    causes = validate_object({"apiVersion": "v1", "kind": "Pod"})
    assert causes[0].field == "kind"
    assert "VirtualMachine" in causes[0].message


def test_garbage_never_raises() -> None:
    for junk in ({"spec": 5}, {"spec": {"domain": []}}, {"spec": {"volumes": "x"}}, {}):
        for kind in (
            "VirtualMachineInstance",
            "VirtualMachine",
            "VirtualMachineInstanceReplicaSet",
        ):
            validate_object({"apiVersion": "kubevirt.io/v1", "kind": kind, **junk})


def test_instancetype_hugepages_are_named_by_page_size() -> None:
    """v1.Hugepages' field is pageSize (the common cx1/m1/n1/rt1 series set it)."""
    spec: dict[str, Any] = {
        "cpu": {"guest": 1},
        "memory": {"guest": "2Gi", "hugepages": {"pageSize": "2Mi"}},
    }
    assert validate_instancetype({"spec": spec}) == []
    spec["memory"]["hugepages"] = {"pageSize": "3Mi"}
    (cause,) = validate_instancetype({"spec": spec})
    assert cause.field == "spec.memory.hugepages.pageSize"
    assert "2Mi, 1Gi" in cause.message
