"""Volume hotplug, the controller's half: attachment pods and the early volume phases."""

from __future__ import annotations

import json
from typing import Any

from kubevirt_api.hotplug import ATTACHMENT_VOLUMES_ANNOTATION
from virt_controller.claims import Claim, missing_claim
from virt_controller.hotplug import hotplug_volume_status, plan_attachment, vmi_hotplug_ops

LAUNCHER = {
    "metadata": {"name": "virt-launcher-a-x", "namespace": "ns", "uid": "pod-uid"},
    "spec": {"nodeName": "node-1"},
    "status": {"phase": "Running"},
}


def _vmi(*hotplugged: str, status: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    volumes: list[dict[str, Any]] = [
        {"name": "root", "containerDisk": {"image": "kubevirt-py/guest:devel"}}
    ]
    volumes += [
        {"name": v, "persistentVolumeClaim": {"claimName": f"{v}-pvc", "hotpluggable": True}}
        for v in hotplugged
    ]
    return {
        "metadata": {"name": "a", "namespace": "ns", "uid": "vmi-uid"},
        "spec": {"volumes": volumes},
        "status": {"phase": "Running", "volumeStatus": status or []},
    }


def _claims(*present: str, bound: bool = True, block: bool = False) -> Any:
    def lookup(namespace: str, name: str) -> Claim | None:
        if namespace != "ns" or name.removesuffix("-pvc") not in present:
            return None
        return Claim.from_raw(
            {
                "metadata": {"name": name, "namespace": namespace},
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "volumeMode": "Block" if block else "Filesystem",
                    "resources": {"requests": {"storage": "64Mi"}},
                },
                "status": {"phase": "Bound" if bound else "Pending"},
            }
        )

    return lookup


def _attachment(name: str, *volumes: str, running: bool = True) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"{name}-uid",
            "annotations": {ATTACHMENT_VOLUMES_ANNOTATION: ",".join(volumes)},
            "creationTimestamp": f"2026-12-02T00:00:0{len(volumes)}Z",
        },
        "status": {"phase": "Running" if running else "Pending"},
    }


def _plan(vmi: dict[str, Any], pods: list[dict[str, Any]], claims: Any) -> Any:
    return plan_attachment(vmi, LAUNCHER, pods, claims, "registry/launcher:devel", "IfNotPresent")


def test_a_hotplugged_claim_gets_an_attachment_pod_on_the_launchers_node() -> None:
    plan = _plan(_vmi("data"), [], _claims("data"))
    pod = plan.create
    assert pod is not None
    assert not plan.delete
    assert pod["metadata"]["generateName"] == "hp-volume-"
    assert pod["metadata"]["labels"] == {"kubevirt.io": "hotplug-disk"}
    assert pod["metadata"]["ownerReferences"][0]["uid"] == "pod-uid"  # goes with the launcher
    term = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == ["node-1"]
    assert pod["spec"]["volumes"] == [
        {"name": "data", "persistentVolumeClaim": {"claimName": "data-pvc"}}
    ]
    container = pod["spec"]["containers"][0]
    assert container["image"] == "registry/launcher:devel"
    assert container["volumeMounts"] == [{"name": "data", "mountPath": "/path/data"}]
    assert container["args"][:2] == ["--volume", "data=/path/data"]
    assert pod["spec"]["securityContext"]["runAsUser"] == 107


def test_a_missing_claim_gets_no_pod_and_does_not_hold_the_launcher_back() -> None:
    vmi = _vmi("data")
    assert _plan(vmi, [], _claims()).create is None
    assert missing_claim(vmi, _claims()) is None


def test_a_running_pod_for_the_set_serves_it_and_nothing_changes() -> None:
    pod = _attachment("hp-volume-1", "data")
    plan = _plan(_vmi("data"), [pod], _claims("data"))
    assert plan.create is None
    assert not plan.delete
    assert plan.serving == {"data": pod}


def test_a_second_volume_makes_a_new_pod_and_the_old_goes_once_it_runs() -> None:
    old = _attachment("hp-volume-1", "data")
    vmi = _vmi("data", "more")
    first = _plan(vmi, [old], _claims("data", "more"))
    assert first.create is not None
    assert not first.delete
    assert first.create["metadata"]["annotations"][ATTACHMENT_VOLUMES_ANNOTATION] == "data,more"
    pending = _attachment("hp-volume-2", "data", "more", running=False)
    assert _plan(vmi, [old, pending], _claims("data", "more")).delete == []
    new = _attachment("hp-volume-2", "data", "more")
    settled = _plan(vmi, [old, new], _claims("data", "more"))
    assert settled.delete == [old]
    assert settled.create is None
    assert settled.serving == {"data": new, "more": new}


def test_a_removed_volume_keeps_its_pod_until_the_handler_unmounted_it() -> None:
    pod = _attachment("hp-volume-1", "data")
    attach = {"attachPodName": "hp-volume-1", "attachPodUID": "hp-volume-1-uid"}
    detaching = _vmi(status=[{"name": "data", "phase": "Detaching", "hotplugVolume": attach}])
    assert _plan(detaching, [pod], _claims("data")).delete == []
    gone = _vmi(status=[{"name": "data", "phase": "UnMountedFromPod", "hotplugVolume": attach}])
    assert _plan(gone, [pod], _claims("data")).delete == [pod]


def test_phases_go_pending_bound_attached_and_never_back_from_mounted() -> None:
    vmi = _vmi("data")
    entries = [{"name": "data", "target": ""}, {"name": "root", "target": ""}]
    (data, root) = hotplug_volume_status(vmi, entries, {}, _claims("data", bound=False))
    assert data["phase"] == "Pending"
    assert "phase" not in root
    (data, _) = hotplug_volume_status(vmi, entries, {}, _claims("data"))
    assert data["phase"] == "Bound"
    pod = _attachment("hp-volume-1", "data")
    (data, _) = hotplug_volume_status(vmi, entries, {"data": pod}, _claims("data"))
    assert data["phase"] == "AttachedToNode"
    assert data["hotplugVolume"] == {
        "attachPodName": "hp-volume-1",
        "attachPodUID": "hp-volume-1-uid",
    }
    mounted = [{"name": "data", "target": "sda", "phase": "Ready"}, {"name": "root", "target": ""}]
    (data, _) = hotplug_volume_status(vmi, mounted, {"data": pod}, _claims("data"))
    assert (data["phase"], data["target"]) == ("Ready", "sda")


def test_a_mounted_volume_that_left_the_spec_is_detaching_then_dropped() -> None:
    attach = {"attachPodName": "hp-volume-1", "attachPodUID": "u"}
    ready = {"name": "data", "target": "sda", "phase": "Ready", "hotplugVolume": attach}
    vmi = _vmi(status=[ready, {"name": "root", "target": ""}])
    entries = [{"name": "root", "target": ""}]
    (data, _) = hotplug_volume_status(vmi, entries, {}, _claims("data"))
    assert (data["name"], data["phase"]) == ("data", "Detaching")
    unmounted = dict(ready, phase="UnMountedFromPod")
    vmi = _vmi(status=[unmounted, {"name": "root", "target": ""}])
    assert [e["name"] for e in hotplug_volume_status(vmi, entries, {}, _claims("data"))] == ["root"]


def _spec(*hotplugged: str) -> dict[str, Any]:
    spec = _vmi(*hotplugged)["spec"]
    spec["domain"] = {
        "devices": {
            "disks": [{"name": "root", "disk": {"bus": "virtio"}}]
            + [{"name": v, "disk": {"bus": "scsi"}} for v in hotplugged]
        }
    }
    return spec


def _apply(vmi: dict[str, Any], ops: list[Any]) -> dict[str, Any]:
    out = dict(vmi)
    spec = json.loads(json.dumps(vmi["spec"]))
    for op in ops:
        path = op["path"].removeprefix("/spec/").split("/")
        target = spec
        for part in path[:-1]:
            target = target.setdefault(part, {})
        if op["op"] == "test":
            assert target.get(path[-1]) == op["value"]
        else:
            target[path[-1]] = op["value"]
    out["spec"] = spec
    return out


def test_the_vm_templates_hotplugged_volumes_reach_the_running_vmi() -> None:
    vmi = _vmi()
    vmi["spec"] = _spec()
    ops = vmi_hotplug_ops(_spec("data"), vmi)
    synced = _apply(vmi, ops)
    assert synced["spec"] == _spec("data")
    assert vmi_hotplug_ops(_spec("data"), synced) == []  # in line: no write


def test_a_volume_gone_from_the_template_leaves_the_vmi_and_others_stay() -> None:
    vmi = _vmi()
    vmi["spec"] = _spec("data", "more")
    synced = _apply(vmi, vmi_hotplug_ops(_spec("more"), vmi))
    assert synced["spec"] == _spec("more")
    assert [d["name"] for d in synced["spec"]["domain"]["devices"]["disks"]] == ["root", "more"]


def _dump_vmi(status: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    vmi = _vmi(status=status)
    vmi["spec"]["volumes"].append(
        {"name": "dump", "memoryDump": {"claimName": "dump-pvc", "hotpluggable": True}}
    )
    return vmi


def test_a_memory_dump_claim_is_held_as_a_writable_directory_and_keeps_its_dump_phases() -> None:
    plan = _plan(_dump_vmi(), [], _claims("dump"))
    assert plan.create is not None
    args = plan.create["spec"]["containers"][0]["args"]
    assert args == ["--dump-dir", "dump=/path/dump"]  # no disk.img to make
    pod = _attachment("hp-volume-1", "dump")
    entries = [{"name": "dump", "target": ""}, {"name": "root", "target": ""}]
    (dump, _) = hotplug_volume_status(_dump_vmi(), entries, {"dump": pod}, _claims("dump"))
    assert (dump["phase"], dump["memoryDumpVolume"]) == (
        "AttachedToNode",
        {"claimName": "dump-pvc"},
    )
    written = {
        "name": "dump",
        "target": "",
        "phase": "MemoryDumpCompleted",
        "memoryDumpVolume": {"claimName": "dump-pvc", "targetFileName": "f.memory.dump"},
    }
    (dump, _) = hotplug_volume_status(
        _dump_vmi(), [written, entries[1]], {"dump": pod}, _claims("dump")
    )
    assert dump["phase"] == "MemoryDumpCompleted"
    assert dump["memoryDumpVolume"]["targetFileName"] == "f.memory.dump"
    # The template's memoryDump volume is not the declarative hotplug's to sync.
    assert vmi_hotplug_ops({"volumes": _dump_vmi()["spec"]["volumes"]}, _vmi()) == []


def test_a_second_hotplug_after_a_removal_tests_the_empty_list_as_it_is() -> None:
    vmi = _vmi()
    vmi["spec"] = {"volumes": [], "domain": {"devices": {"disks": []}}}
    template = _spec("data")
    ops = vmi_hotplug_ops(template, vmi)
    assert {"op": "test", "path": "/spec/volumes", "value": []} in ops
    assert {"op": "test", "path": "/spec/domain/devices/disks", "value": []} in ops
