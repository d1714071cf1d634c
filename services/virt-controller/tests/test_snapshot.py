"""The snapshot and restore controllers against in-memory caches and the fake API server:
the VM locked and captured, phases, conditions and indications, the deadline, deletion
policies, volumeSnapshotStatuses, and restores to the same VM and to a new one."""

from __future__ import annotations

import copy
import datetime as dt
import json
from typing import Any, cast

from kube_runtime import KubeClient, ManualClock, RawObject, SharedInformer, WorkQueue
from kube_runtime.fakes import FakeApiServer, FakeListWatch
from virt_controller.restore import (
    LAST_RESTORE_ANNOTATION,
    RESTORE_FINALIZER,
    RESTORE_SNAPSHOT_INDEX,
    RESTORE_TARGET_INDEX,
    RestoreController,
    index_by_restore_snapshot,
    index_by_restore_target,
)
from virt_controller.snapshot import (
    SNAPSHOT_FINALIZER,
    SOURCE_FINALIZER,
    SOURCE_INDEX,
    SnapshotController,
    index_by_source,
)

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def informer(name: str, **indexers: Any) -> SharedInformer[RawObject]:
    return SharedInformer(FakeListWatch(), name=name, indexers=indexers or None)


def vm_body(name: str = "vm", memory: str = "64Mi", run_strategy: str = "Halted") -> dict[str, Any]:
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": name, "namespace": "ns", "labels": {"app": "demo"}},
        "spec": {
            "runStrategy": run_strategy,
            "template": {
                "spec": {
                    "domain": {"memory": {"guest": memory}, "devices": {}},
                    "volumes": [
                        {"name": "rootdisk", "containerDisk": {"image": "tiny"}},
                        {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
                    ],
                }
            },
        },
    }


def snapshot_body(name: str = "snap", vm: str = "vm", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "snapshot.kubevirt.io/v1beta1",
        "kind": "VirtualMachineSnapshot",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {
            "source": {"apiGroup": "kubevirt.io", "kind": "VirtualMachine", "name": vm},
            **spec,
        },
    }


def restore_body(name: str = "restore", target: str = "vm", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "snapshot.kubevirt.io/v1beta1",
        "kind": "VirtualMachineRestore",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {
            "target": {"apiGroup": "kubevirt.io", "kind": "VirtualMachine", "name": target},
            "virtualMachineSnapshotName": "snap",
            **spec,
        },
    }


class Rig:
    def __init__(self) -> None:
        self.clock = T0
        self.api = FakeApiServer(
            {
                "virtualmachinesnapshots": informer("snapshots", **{SOURCE_INDEX: index_by_source}),
                "virtualmachinesnapshotcontents": informer("contents"),
                "virtualmachinerestores": informer(
                    "restores",
                    **{
                        RESTORE_TARGET_INDEX: index_by_restore_target,
                        RESTORE_SNAPSHOT_INDEX: index_by_restore_snapshot,
                    },
                ),
                "virtualmachines": informer("vms"),
                "virtualmachineinstances": informer("vmis"),
            }
        )
        c = self.api.caches
        client = cast(KubeClient, self.api)
        self.snapshots = SnapshotController(
            client,
            c["virtualmachinesnapshots"],
            c["virtualmachinesnapshotcontents"],
            c["virtualmachines"],
            c["virtualmachineinstances"],
            WorkQueue("snapshot", clock=ManualClock()),
            now=lambda: self.clock,
        )
        self.restores = RestoreController(
            client,
            c["virtualmachinerestores"],
            c["virtualmachinesnapshots"],
            c["virtualmachinesnapshotcontents"],
            c["virtualmachines"],
            c["virtualmachineinstances"],
            WorkQueue("restore", clock=ManualClock()),
            now=lambda: self.clock,
        )

    def get(self, plural: str, name: str) -> dict[str, Any]:
        obj = self.api.obj(plural, name)
        assert obj is not None, f"no {plural}/{name}"
        result: dict[str, Any] = obj
        return result

    def snapshot(self, name: str = "snap") -> dict[str, Any]:
        return self.get("virtualmachinesnapshots", name)

    def vm(self, name: str = "vm") -> dict[str, Any]:
        return self.get("virtualmachines", name)

    def restore(self, name: str = "restore") -> dict[str, Any]:
        return self.get("virtualmachinerestores", name)

    async def settle(self, rounds: int = 30) -> None:
        """Reconcile every snapshot, VM and restore until a pass writes nothing."""
        c = self.api.caches
        for _ in range(rounds):
            before = len(self.api.writes)
            for s in list(c["virtualmachinesnapshots"].store.objects()):
                await self.snapshots.reconcile(f"ns/{s['metadata']['name']}")
            for v in list(c["virtualmachines"].store.objects()):
                await self.snapshots.reconcile(f"vm:ns/{v['metadata']['name']}")
            for r in list(c["virtualmachinerestores"].store.objects()):
                await self.restores.reconcile(f"ns/{r['metadata']['name']}")
            if len(self.api.writes) == before:
                return
        raise AssertionError(f"no steady state: {self.api.writes[-8:]}")

    def start_vmi(self, name: str = "vm", *, agent: bool = False) -> None:
        status: dict[str, Any] = {"phase": "Running"}
        if agent:
            status["conditions"] = [{"type": "AgentConnected", "status": "True"}]
        self.api.put(
            "virtualmachineinstances",
            {"metadata": {"name": name, "namespace": "ns"}, "status": status},
        )


class Plural:
    """A resource as the fake API server tells them apart."""

    def __init__(self, plural: str) -> None:
        self.plural = plural


def conditions(obj: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c.get("reason", "")) for c in obj["status"]["conditions"]}


async def test_a_stopped_vm_is_captured_and_the_snapshot_succeeds_without_volume_backups() -> None:
    rig = Rig()
    rig.api.put("virtualmachines", vm_body())
    rig.api.put("virtualmachinesnapshots", snapshot_body())
    await rig.settle()
    snap = rig.snapshot()
    status = snap["status"]
    assert (status["phase"], status["readyToUse"]) == ("Succeeded", True)
    assert status["sourceUID"] == rig.vm()["metadata"]["uid"]
    assert conditions(snap) == {
        "Progressing": ("False", "Operation complete"),
        "Ready": ("True", "Operation complete"),
    }
    assert "indications" not in status
    assert "error" not in status
    assert status["snapshotVolumes"] == {"excludedVolumes": ["rootdisk", "data"]}
    content = rig.get("virtualmachinesnapshotcontents", status["virtualMachineSnapshotContentName"])
    assert content["metadata"]["name"] == f"vmsnapshot-content-{snap['metadata']['uid']}"
    assert content["spec"]["virtualMachineSnapshotName"] == "snap"
    assert content["spec"]["volumeBackups"] == []
    captured = content["spec"]["source"]["virtualMachine"]
    assert captured["spec"] == vm_body()["spec"]
    assert captured["metadata"]["labels"] == {"app": "demo"}
    assert content["status"]["readyToUse"] is True
    assert status["creationTime"] == content["status"]["creationTime"]
    assert SNAPSHOT_FINALIZER in snap["metadata"]["finalizers"]
    # Unlocked again once done.
    vm = rig.vm()
    assert "snapshotInProgress" not in vm.get("status", {})
    assert SOURCE_FINALIZER not in (vm["metadata"].get("finalizers") or [])


async def test_while_in_progress_the_vm_is_locked_by_the_snapshot() -> None:
    rig = Rig()
    rig.api.put("virtualmachines", vm_body())
    rig.api.put("virtualmachinesnapshots", snapshot_body())
    await rig.snapshots.reconcile("ns/snap")
    vm = rig.vm()
    assert vm["status"]["snapshotInProgress"] == "snap"
    assert SOURCE_FINALIZER in vm["metadata"]["finalizers"]
    assert rig.snapshot()["status"]["phase"] == "InProgress"
    await rig.snapshots.reconcile("ns/snap")
    assert conditions(rig.snapshot())["Progressing"] == (
        "True",
        "Source locked and operation in progress",
    )


async def test_a_running_vm_without_an_agent_is_indicated_online_and_crash_consistent() -> None:
    rig = Rig()
    rig.api.put("virtualmachines", vm_body(run_strategy="Always"))
    rig.start_vmi()
    rig.api.put("virtualmachinesnapshots", snapshot_body())
    await rig.settle()
    status = rig.snapshot()["status"]
    assert status["phase"] == "Succeeded"
    assert status["indications"] == ["Online", "NoGuestAgent"]
    assert [i["indication"] for i in status["sourceIndications"]] == ["Online", "NoGuestAgent"]
    assert all(i["message"] for i in status["sourceIndications"])


async def test_a_connected_agent_is_indicated() -> None:
    rig = Rig()
    rig.api.put("virtualmachines", vm_body(run_strategy="Always"))
    rig.start_vmi(agent=True)
    rig.api.put("virtualmachinesnapshots", snapshot_body())
    await rig.settle()
    assert rig.snapshot()["status"]["indications"] == ["Online", "GuestAgent"]


async def test_a_missing_source_keeps_the_snapshot_in_progress_until_the_deadline() -> None:
    rig = Rig()
    rig.api.put("virtualmachinesnapshots", snapshot_body(failureDeadline="1m"))
    await rig.settle()
    snap = rig.snapshot()
    assert snap["status"]["phase"] == "InProgress"
    assert conditions(snap)["Progressing"] == ("False", "Source does not exist")
    rig.clock = T0 + dt.timedelta(minutes=2)
    await rig.settle()
    snap = rig.snapshot()
    assert snap["status"]["phase"] == "Failed"
    assert conditions(snap)["Failure"] == ("True", "snapshot deadline exceeded")


async def test_a_vm_being_restored_is_not_locked() -> None:
    rig = Rig()
    vm = vm_body()
    vm["status"] = {"restoreInProgress": "other"}
    rig.api.put("virtualmachines", vm)
    rig.api.put("virtualmachinesnapshots", snapshot_body())
    await rig.settle()
    snap = rig.snapshot()
    assert snap["status"]["phase"] == "InProgress"
    assert conditions(snap)["Progressing"] == ("False", "Source not locked")
    assert rig.api.obj("virtualmachinesnapshotcontents", "x") is None
    assert not list(rig.api.caches["virtualmachinesnapshotcontents"].store.objects())


async def test_deleting_a_snapshot_deletes_its_content_unless_retained() -> None:
    for policy, kept in (("Delete", False), ("Retain", True)):
        rig = Rig()
        rig.api.put("virtualmachines", vm_body())
        rig.api.put("virtualmachinesnapshots", snapshot_body(deletionPolicy=policy))
        await rig.settle()
        content_name = rig.snapshot()["status"]["virtualMachineSnapshotContentName"]
        await rig.api.delete(Plural("virtualmachinesnapshots"), "snap", "ns")
        await rig.snapshots.reconcile("ns/snap")
        content = rig.api.obj("virtualmachinesnapshotcontents", content_name)
        assert (content is not None) is kept, policy
        assert SNAPSHOT_FINALIZER not in (
            (rig.api.obj("virtualmachinesnapshots", "snap") or {"metadata": {}})["metadata"].get(
                "finalizers"
            )
            or []
        )


async def test_the_vm_reports_which_volumes_can_be_snapshotted_and_why_not() -> None:
    rig = Rig()
    rig.api.put("virtualmachines", vm_body())
    await rig.settle()
    statuses = rig.vm()["status"]["volumeSnapshotStatuses"]
    assert [(s["name"], s["enabled"]) for s in statuses] == [
        ("rootdisk", False),
        ("data", False),
    ]
    assert statuses[0]["reason"] == (
        "Snapshot is not supported for this volumeSource type [rootdisk]"
    )
    assert "No VolumeSnapshotClass" in statuses[1]["reason"]
    writes = len(rig.api.writes)
    await rig.snapshots.reconcile("vm:ns/vm")
    assert len(rig.api.writes) == writes, "an unchanged status is not written again"


async def snapshotted(rig: Rig) -> None:
    rig.api.put("virtualmachines", vm_body(memory="64Mi"))
    rig.api.put("virtualmachinesnapshots", snapshot_body())
    await rig.settle()
    assert rig.snapshot()["status"]["readyToUse"] is True
    vm = rig.vm()
    vm["spec"]["template"]["spec"]["domain"]["memory"]["guest"] = "128Mi"
    rig.api.put("virtualmachines", vm)


async def test_restore_puts_the_snapshot_spec_back_into_the_stopped_vm() -> None:
    rig = Rig()
    await snapshotted(rig)
    rig.api.put("virtualmachinerestores", restore_body())
    await rig.settle()
    vm = rig.vm()
    assert vm["spec"] == vm_body(memory="64Mi")["spec"]
    restore = rig.restore()
    assert vm["metadata"]["annotations"][LAST_RESTORE_ANNOTATION] == (
        f"restore-{restore['metadata']['uid']}"
    )
    assert "restoreInProgress" not in vm["status"]
    status = restore["status"]
    assert status["complete"] is True
    assert status["restoreTime"]
    assert status["restores"] == []
    assert conditions(restore) == {
        "Progressing": ("False", "Operation complete"),
        "Ready": ("True", "Operation complete"),
    }
    assert RESTORE_FINALIZER in restore["metadata"]["finalizers"]


async def test_restore_to_a_new_name_creates_the_vm_after_the_patches() -> None:
    rig = Rig()
    await snapshotted(rig)
    patch = {"op": "replace", "path": "/metadata/labels/app", "value": "copy"}
    rig.api.put("virtualmachinerestores", restore_body(target="copy", patches=[json.dumps(patch)]))
    await rig.settle()
    copy_vm = rig.vm("copy")
    assert copy_vm["spec"] == vm_body(memory="64Mi")["spec"]
    assert copy_vm["metadata"]["labels"] == {"app": "copy"}
    assert rig.restore()["status"]["complete"] is True
    assert rig.vm()["spec"]["template"]["spec"]["domain"]["memory"]["guest"] == "128Mi"


async def test_a_running_target_is_waited_for_stopped_or_refused_by_policy() -> None:
    rig = Rig()
    await snapshotted(rig)
    rig.start_vmi()
    rig.api.put("virtualmachinerestores", restore_body())
    await rig.settle()
    restore = rig.restore()
    assert restore["status"]["complete"] is False
    assert conditions(restore)["Progressing"][0] == "True"
    assert "to be stopped" in conditions(restore)["Progressing"][1]
    rig.clock = T0 + dt.timedelta(minutes=6)  # past the grace period
    await rig.settle()
    assert conditions(rig.restore())["Progressing"] == (
        "False",
        "Restore target VM vm is running; it must be stopped "
        "(targetReadinessPolicy WaitGracePeriod)",
    )

    stopping = Rig()
    await snapshotted(stopping)
    stopping.start_vmi()
    stopping.api.put("virtualmachinerestores", restore_body(targetReadinessPolicy="StopTarget"))
    await stopping.settle()
    assert stopping.vm()["spec"]["runStrategy"] == "Halted"
    # What the VM controller does for runStrategy Halted.
    await stopping.api.delete(Plural("virtualmachineinstances"), "vm", "ns")
    await stopping.settle()
    assert stopping.restore()["status"]["complete"] is True
    assert stopping.vm()["spec"]["template"]["spec"]["domain"]["memory"]["guest"] == "64Mi"


async def test_a_restore_waits_for_its_snapshot_to_exist_and_be_ready() -> None:
    rig = Rig()
    vm = vm_body()
    rig.api.put("virtualmachinerestores", restore_body())
    await rig.settle()
    assert conditions(rig.restore())["Ready"] == (
        "False",
        "Waiting for VMSnapshot snap to exist and be ready",
    )
    rig.api.put("virtualmachines", copy.deepcopy(vm))
    rig.api.put("virtualmachinesnapshots", snapshot_body())
    await rig.settle()
    assert rig.restore()["status"]["complete"] is True
