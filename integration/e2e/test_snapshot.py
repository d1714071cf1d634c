"""Snapshots and restores of a real VM (upstream's "simple VM" path: no volume can be
snapshotted here, so the VM definition is what a snapshot keeps).

A running VM is snapshotted (Online, the guest agent indicated as the VMI reports it), then
stopped and changed; a restore puts the snapshot's spec back and the VM boots from it; a
second restore of the same VM while one waits is refused; a restore to a new name creates
that VM after the restore's patches.
"""

from __future__ import annotations

import json
from typing import Any

SNAPSHOT_API = "snapshot.kubevirt.io/v1beta1"


def snapshot(name: str, vm: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": SNAPSHOT_API,
        "kind": "VirtualMachineSnapshot",
        "metadata": {"name": name},
        "spec": {"source": {"apiGroup": "kubevirt.io", "kind": "VirtualMachine", "name": vm}}
        | spec,
    }


def restore(name: str, target: str, snapshot_name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": SNAPSHOT_API,
        "kind": "VirtualMachineRestore",
        "metadata": {"name": name},
        "spec": {
            "target": {"apiGroup": "kubevirt.io", "kind": "VirtualMachine", "name": target},
            "virtualMachineSnapshotName": snapshot_name,
        }
        | spec,
    }


def test_snapshot_a_running_vm_change_it_and_restore_it_and_a_copy(
    kubevirt: Any, namespace: str
) -> None:
    kubevirt.apply(kubevirt.vm("snappy", containerdisk=True), namespace)
    vmi = kubevirt.wait_running("snappy", namespace)

    kubevirt.apply(snapshot("snap-1", "snappy"), namespace)

    def succeeded() -> dict[str, Any] | None:
        snap = kubevirt.get("vmsnapshot", "snap-1", namespace) or {}
        return snap if snap.get("status", {}).get("phase") == "Succeeded" else None

    snap = kubevirt.wait_for("the snapshot to succeed", succeeded, 120)
    status = snap["status"]
    assert status["readyToUse"] is True
    vm = kubevirt.get("vm", "snappy", namespace)
    assert vm is not None
    assert status["sourceUID"] == vm["metadata"]["uid"]
    conditions = {c["type"]: (c["status"], c.get("reason")) for c in status["conditions"]}
    assert conditions["Ready"] == ("True", "Operation complete")
    agent = {c["type"]: c["status"] for c in vmi["status"].get("conditions", [])}.get(
        "AgentConnected"
    )
    assert status["indications"][0] == "Online"
    assert status["indications"][1] in ("GuestAgent", "NoGuestAgent")
    if agent == "True":
        assert status["indications"][1] == "GuestAgent"
    assert status["snapshotVolumes"] == {"excludedVolumes": ["root"]}
    content = kubevirt.get(
        "vmsnapshotcontent", status["virtualMachineSnapshotContentName"], namespace
    )
    assert content is not None
    assert content["spec"]["volumeBackups"] == []
    assert content["spec"]["source"]["virtualMachine"]["spec"] == vm["spec"]
    # The lock is gone and the VM says which volumes could be snapshotted.
    assert "snapshotInProgress" not in vm.get("status", {})
    assert vm["status"]["volumeSnapshotStatuses"] == [
        {
            "name": "root",
            "enabled": False,
            "reason": "Snapshot is not supported for this volumeSource type [root]",
        }
    ]

    # While the VM runs, a restore that waits for it holds the VM against a second one.
    kubevirt.apply(
        restore("waiting", "snappy", "snap-1", targetReadinessPolicy="WaitEventually"), namespace
    )
    kubevirt.wait_for(
        "the restore to wait for the running VM",
        lambda: (
            "to be stopped"
            in json.dumps((kubevirt.get("vmrestore", "waiting", namespace) or {}).get("status", {}))
        ),
        60,
    )
    second = kubevirt.kubectl.run(
        "create",
        "-n",
        namespace,
        "-f",
        "-",
        stdin=json.dumps(restore("second", "snappy", "snap-1")),
        check=False,
    )
    assert second.returncode != 0
    assert 'VirtualMachineRestore "waiting" in progress for VM snappy' in second.stderr
    kubevirt.kubectl.run("delete", "vmrestore", "waiting", "-n", namespace, "--wait=true")

    kubevirt.stop("snappy", namespace)
    changed = {"spec": {"template": {"metadata": {"labels": {"changed": "yes"}}}}}
    kubevirt.kubectl.run(
        "patch", "vm", "snappy", "-n", namespace, "--type=merge", "-p", json.dumps(changed)
    )

    kubevirt.apply(restore("restore-1", "snappy", "snap-1"), namespace)

    def complete(name: str) -> dict[str, Any] | None:
        found = kubevirt.get("vmrestore", name, namespace) or {}
        return found if found.get("status", {}).get("complete") is True else None

    done = kubevirt.wait_for("the restore to complete", lambda: complete("restore-1"), 120)
    restored = kubevirt.get("vm", "snappy", namespace)
    assert restored is not None
    assert restored["spec"] == content["spec"]["source"]["virtualMachine"]["spec"]
    assert "changed" not in restored["spec"]["template"]["metadata"]["labels"]
    assert restored["metadata"]["annotations"]["restore.kubevirt.io/lastRestoreUID"] == (
        f"restore-1-{done['metadata']['uid']}"
    )
    assert done["status"]["restores"] == []
    # The snapshot's runStrategy is Always: once the restore is done the VM starts from it.
    again = kubevirt.wait_running("snappy", namespace)
    assert again["metadata"]["uid"] != vmi["metadata"]["uid"]
    assert "changed" not in again["metadata"].get("labels", {})

    # To a new name: the patches apply to the new VM, the source is untouched.
    halt = json.dumps({"op": "replace", "path": "/spec/runStrategy", "value": "Halted"})
    kubevirt.apply(restore("to-copy", "snappy-copy", "snap-1", patches=[halt]), namespace)
    kubevirt.wait_for("the copy's restore to complete", lambda: complete("to-copy"), 120)
    copy_vm = kubevirt.get("vm", "snappy-copy", namespace)
    assert copy_vm is not None
    assert copy_vm["spec"]["runStrategy"] == "Halted"
    assert (
        copy_vm["spec"]["template"]
        == content["spec"]["source"]["virtualMachine"]["spec"]["template"]
    )
    assert kubevirt.get("vmi", "snappy-copy", namespace) is None


def test_a_snapshot_of_something_else_than_a_vm_is_refused_naming_the_field(
    kubevirt: Any, namespace: str
) -> None:
    bad = snapshot("bad", "x")
    bad["spec"]["source"]["kind"] = "Pod"
    answer = kubevirt.kubectl.run(
        "create", "-n", namespace, "-f", "-", stdin=json.dumps(bad), check=False
    )
    assert answer.returncode != 0
    assert "spec.source.kind" in answer.stderr
    assert "only VirtualMachine is supported" in answer.stderr
