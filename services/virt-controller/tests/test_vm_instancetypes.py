"""The VM controller with instancetypes and preferences: revisions stored with upstream's
names, the VMI built from them, missing objects named in a Failure condition, and a
changed instancetype on a running VM asking for a restart instead of touching the VMI."""

from __future__ import annotations

import datetime as dt
from typing import Any, cast

import pytest
from kube_runtime import (
    CONTROLLER_REVISIONS,
    ApiError,
    KubeClient,
    ManualClock,
    RawObject,
    SharedInformer,
    WorkQueue,
)
from kube_runtime.fakes import FakeListWatch
from kubevirt_api.instancetypes import controller_revision
from kubevirt_api.resources import (
    VIRTUAL_MACHINE_CLUSTER_INSTANCETYPES,
    VIRTUAL_MACHINE_CLUSTER_PREFERENCES,
)
from service_kit import MetricsRegistry
from virt_controller.instancetypes import SyncFailedError
from virt_controller.metrics import ControllerMetrics
from virt_controller.objects import index_by_controller
from virt_controller.vm import VmController
from virt_controller.vmi import OWNER_INDEX

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


class RevisionClient:
    """GETs read `objects` (else 404); creations are recorded and stored, a second
    create of a revision name is 409 AlreadyExists, as the API server does."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Any]] = []
        self.objects: dict[str, Any] = {}

    async def get(self, resource: Any, name: str, namespace: str | None = None) -> Any:
        path = resource.path(namespace, name)
        if path not in self.objects:
            raise ApiError(404, "NotFound", f"{name} not found")
        return self.objects[path]

    async def create(
        self, resource: Any, body: dict[str, Any], namespace: str | None = None
    ) -> Any:
        path = resource.path(namespace, body["metadata"]["name"])
        if path in self.objects:
            raise ApiError(409, "AlreadyExists", "exists")
        self.objects[path] = body
        self.calls.append(("create", resource.plural, body))
        return body

    async def delete(self, resource: Any, name: str, namespace: Any = None, **kw: Any) -> Any:
        self.calls.append(("delete", resource.plural, {"name": name, **kw}))
        return {}

    async def json_patch(
        self, resource: Any, name: str, ops: Any, namespace: Any = None, **kw: Any
    ) -> Any:
        where = resource.plural + ("/" + kw["subresource"] if kw.get("subresource") else "")
        self.calls.append(("json_patch", where, ops))
        return {}

    def writes(self, verb: str, resource: str) -> list[Any]:
        return [body for v, r, body in self.calls if v == verb and r == resource]


def informer(name: str, **indexers: Any) -> SharedInformer[RawObject]:
    return SharedInformer(FakeListWatch(), name=name, indexers=indexers or None)


def u1(name: str, guest: int, memory: str, generation: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "instancetype.kubevirt.io/v1beta1",
        "kind": "VirtualMachineClusterInstancetype",
        "metadata": {"name": name, "uid": f"{name}-uid", "generation": generation},
        "spec": {"cpu": {"guest": guest}, "memory": {"guest": memory}},
    }


FEDORA = {
    "apiVersion": "instancetype.kubevirt.io/v1beta1",
    "kind": "VirtualMachineClusterPreference",
    "metadata": {"name": "fedora", "uid": "fedora-uid", "generation": 2, "labels": {"x": "y"}},
    "spec": {
        "cpu": {"preferredCPUTopology": "cores"},
        "devices": {"preferredDiskBus": "virtio", "preferredInterfaceModel": "virtio"},
    },
}


def setup(
    *, run: str = "Always", itype: str = "u1.small", status: dict[str, Any] | None = None
) -> tuple[VmController, RevisionClient, Any, dict[str, Any]]:
    client = RevisionClient()
    for obj, resource in (
        (u1("u1.small", 1, "2Gi"), VIRTUAL_MACHINE_CLUSTER_INSTANCETYPES),
        (u1("u1.medium", 2, "4Gi"), VIRTUAL_MACHINE_CLUSTER_INSTANCETYPES),
        (FEDORA, VIRTUAL_MACHINE_CLUSTER_PREFERENCES),
    ):
        client.objects[resource.path(None, obj["metadata"]["name"])] = obj
    vms = informer("vms")
    vmis = informer("vmis", **{OWNER_INDEX: index_by_controller(None)})
    queue: WorkQueue[str] = WorkQueue("t", clock=ManualClock())
    ctl = VmController(
        cast(KubeClient, client),
        vms,
        vmis,
        queue,
        ControllerMetrics(MetricsRegistry()),
        now=lambda: NOW,
    )
    vm = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": "vm1", "namespace": "ns", "uid": "vm-uid"},
        "spec": {
            "runStrategy": run,
            "instancetype": {"name": itype},
            "preference": {"name": "fedora"},
            "template": {
                "spec": {
                    "domain": {"devices": {"disks": [{"name": "root", "disk": {}}]}},
                    "volumes": [{"name": "root", "containerDisk": {"image": "img:1"}}],
                }
            },
        },
        "status": status or {},
    }
    vms.store.upsert(vm)
    return ctl, client, vmis, vm


def status_ops(client: RevisionClient) -> dict[str, Any]:
    (ops,) = client.writes("json_patch", "virtualmachines/status")
    return {o["path"]: o.get("value") for o in ops}


async def test_revisions_are_stored_and_the_vmi_is_built_from_them() -> None:
    ctl, client, _, _ = setup()
    await ctl.reconcile("ns/vm1")
    revisions = client.writes("create", "controllerrevisions")
    assert [r["metadata"]["name"] for r in revisions] == [
        "vm1-u1.small-v1beta1-u1.small-uid-1",
        "vm1-fedora-v1beta1-fedora-uid-2",
    ]
    pref_rev = revisions[1]
    assert pref_rev["metadata"]["ownerReferences"][0]["uid"] == "vm-uid"
    assert pref_rev["metadata"]["labels"]["instancetype.kubevirt.io/object-kind"] == (
        "VirtualMachineClusterPreference"
    )
    assert "labels" not in pref_rev["data"]["metadata"]
    (vmi,) = client.writes("create", "virtualmachineinstances")
    domain = vmi["spec"]["domain"]
    assert domain["cpu"] == {"sockets": 1, "cores": 1, "threads": 1}
    assert domain["memory"] == {"guest": "2Gi"}
    assert domain["devices"]["disks"] == [{"name": "root", "disk": {"bus": "virtio"}}]
    assert domain["devices"]["interfaces"] == [
        {"name": "default", "masquerade": {}, "model": "virtio"}
    ]
    assert vmi["metadata"]["annotations"] == {
        "kubevirt.io/cluster-instancetype-name": "u1.small",
        "kubevirt.io/cluster-preference-name": "fedora",
    }
    ops = status_ops(client)
    assert ops["/status/instancetypeRef"] == {
        "name": "u1.small",
        "controllerRevisionRef": {"name": "vm1-u1.small-v1beta1-u1.small-uid-1"},
    }
    assert ops["/status/preferenceRef"] == {
        "name": "fedora",
        "controllerRevisionRef": {"name": "vm1-fedora-v1beta1-fedora-uid-2"},
    }


async def test_a_pinned_vm_keeps_its_revision_after_the_instancetype_changes() -> None:
    ctl, client, _, _ = setup(
        status={
            "instancetypeRef": {
                "name": "u1.small",
                "controllerRevisionRef": {"name": "vm1-u1.small-v1beta1-u1.small-uid-1"},
            },
            "preferenceRef": {
                "name": "fedora",
                "controllerRevisionRef": {"name": "vm1-fedora-v1beta1-fedora-uid-2"},
            },
        }
    )
    vm = cast(dict[str, Any], ctl.vms.get_raw("ns/vm1"))
    for obj in (u1("u1.small", 1, "2Gi"), FEDORA):
        revision = controller_revision(vm, obj)
        client.objects[CONTROLLER_REVISIONS.path("ns", revision["metadata"]["name"])] = revision
    # The object is edited later: 4 vCPUs now, generation 2.
    client.objects[VIRTUAL_MACHINE_CLUSTER_INSTANCETYPES.path(None, "u1.small")] = u1(
        "u1.small", 4, "8Gi", generation=2
    )
    await ctl.reconcile("ns/vm1")
    assert not client.writes("create", "controllerrevisions")
    (vmi,) = client.writes("create", "virtualmachineinstances")
    assert vmi["spec"]["domain"]["memory"] == {"guest": "2Gi"}
    assert "/status/instancetypeRef" not in status_ops(client)


async def test_a_missing_instancetype_fails_the_sync_with_a_condition() -> None:
    ctl, client, _, _ = setup(itype="nope")
    with pytest.raises(SyncFailedError):  # retried with back-off
        await ctl.reconcile("ns/vm1")
    assert not client.writes("create", "virtualmachineinstances")
    assert not client.writes("create", "controllerrevisions")
    (failure,) = [c for c in status_ops(client)["/status/conditions"] if c["type"] == "Failure"]
    assert failure["status"] == "True"
    assert failure["reason"] == "FailedFindInstancetype"
    assert failure["message"] == (
        'virtualmachineclusterinstancetypes.instancetype.kubevirt.io "nope" not found'
    )


async def test_a_missing_preference_is_named_as_such() -> None:
    ctl, client, _, vm = setup()
    vm["spec"]["preference"] = {"name": "gone", "kind": "VirtualMachinePreference"}
    ctl.vms.store.upsert(vm)
    with pytest.raises(SyncFailedError):  # retried with back-off
        await ctl.reconcile("ns/vm1")
    assert not client.writes("create", "virtualmachineinstances")
    (failure,) = [c for c in status_ops(client)["/status/conditions"] if c["type"] == "Failure"]
    assert failure["reason"] == "FailedFindPreference"
    assert (
        failure["message"] == 'virtualmachinepreferences.instancetype.kubevirt.io "gone" not found'
    )


async def test_a_revision_name_taken_by_other_data_fails_the_sync() -> None:
    ctl, client, _, _ = setup()
    name = "vm1-u1.small-v1beta1-u1.small-uid-1"
    client.objects[CONTROLLER_REVISIONS.path("ns", name)] = {
        "metadata": {"name": name},
        "data": {**u1("u1.small", 8, "1Gi")},
    }
    with pytest.raises(SyncFailedError):  # retried with back-off
        await ctl.reconcile("ns/vm1")
    assert not client.writes("create", "virtualmachineinstances")
    (failure,) = [c for c in status_ops(client)["/status/conditions"] if c["type"] == "Failure"]
    assert failure["reason"] == "FailedCreate"
    assert f"found existing ControllerRevision with unexpected data: {name}" in failure["message"]


async def test_a_template_conflicting_with_the_instancetype_fails_the_sync() -> None:
    ctl, client, _, vm = setup()
    vm["spec"]["template"]["spec"]["domain"]["memory"] = {"guest": "1Gi"}
    ctl.vms.store.upsert(vm)
    with pytest.raises(SyncFailedError):  # retried with back-off
        await ctl.reconcile("ns/vm1")
    assert not client.writes("create", "virtualmachineinstances")
    (failure,) = [c for c in status_ops(client)["/status/conditions"] if c["type"] == "Failure"]
    assert failure["reason"] == "FailedCreate"
    assert failure["message"].endswith(
        "VM field(s) spec.template.spec.domain.memory.guest conflicts with selected instance type"
    )


async def test_a_new_instancetype_on_a_running_vm_requires_a_restart() -> None:
    ctl, client, vmis, _ = setup(
        itype="u1.medium",
        status={
            "instancetypeRef": {
                "name": "u1.small",
                "controllerRevisionRef": {"name": "vm1-u1.small-v1beta1-u1.small-uid-1"},
            },
        },
    )
    vmis.store.upsert(
        {
            "metadata": {
                "name": "vm1",
                "namespace": "ns",
                "uid": "vmi-uid",
                "annotations": {
                    "kubevirt.io/cluster-instancetype-name": "u1.small",
                    "kubevirt.io/cluster-preference-name": "fedora",
                },
                "ownerReferences": [
                    {"kind": "VirtualMachine", "uid": "vm-uid", "controller": True}
                ],
            },
            "status": {"phase": "Running"},
        }
    )
    await ctl.reconcile("ns/vm1")
    assert not client.writes("create", "virtualmachineinstances")
    assert not client.writes("delete", "virtualmachineinstances")
    ops = status_ops(client)
    assert ops["/status/instancetypeRef"] == {
        "name": "u1.medium",
        "controllerRevisionRef": {"name": "vm1-u1.medium-v1beta1-u1.medium-uid-1"},
    }
    (restart,) = [c for c in ops["/status/conditions"] if c["type"] == "RestartRequired"]
    assert restart["status"] == "True"
    assert restart["message"] == "a non-live-updatable field was changed in the template spec"


async def test_an_instancetype_created_later_clears_the_failure_and_starts_the_vm() -> None:
    ctl, client, _, vm = setup(itype="later")
    with pytest.raises(SyncFailedError):
        await ctl.reconcile("ns/vm1")
    failed = status_ops(client)["/status/conditions"]
    vm["status"] = {"conditions": failed}
    ctl.vms.store.upsert(vm)
    client.calls.clear()
    path = VIRTUAL_MACHINE_CLUSTER_INSTANCETYPES.path(None, "later")
    client.objects[path] = u1("later", 2, "1Gi")
    await ctl.reconcile("ns/vm1")
    (vmi,) = client.writes("create", "virtualmachineinstances")
    assert vmi["spec"]["domain"]["cpu"] == {"sockets": 1, "cores": 2, "threads": 1}
    assert [c["type"] for c in status_ops(client)["/status/conditions"]] == ["Ready"]
