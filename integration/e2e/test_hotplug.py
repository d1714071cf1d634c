"""Volume hotplug: a PVC attached to a running guest and taken away again, without a restart.

`virtctl addvolume` puts the claim on the VMI (hotpluggable); virt-controller's attachment
pod mounts it on the VMI's node, virt-handler binds its disk.img into the launcher, the
launcher attaches it on the guest's virtio-scsi controller and the guest sees a new
/dev/sdX. The guest writes a line to it, which lands in the claim's disk.img on the node.
`virtctl removevolume` detaches it: the device goes from the guest, the entry from
volumeStatus, the attachment pod from the cluster. As upstream's declarative hotplug, both
go through the VM's template, which virt-controller brings the running VMI in line with.
"""

from __future__ import annotations

import json
import re
import secrets
from pathlib import Path
from typing import Any

CLAIM = "hot"
VM = "hotplug"


def _entry(kubevirt: Any, namespace: str) -> dict[str, Any] | None:
    vmi = kubevirt.get("vmi", VM, namespace) or {}
    found = [s for s in vmi.get("status", {}).get("volumeStatus", []) if s["name"] == CLAIM]
    return found[0] if found else None


def _ready(kubevirt: Any, namespace: str) -> dict[str, Any]:
    def ready() -> dict[str, Any] | None:
        entry = _entry(kubevirt, namespace)
        return entry if entry and entry.get("phase") == "Ready" else None

    return kubevirt.wait_for(f"volume {CLAIM} Ready", ready, 180)


def _attachment_pods(kubevirt: Any, namespace: str) -> list[dict[str, Any]]:
    found = kubevirt.kubectl.run(
        "get", "pods", "-n", namespace, "-l", "kubevirt.io=hotplug-disk", "-o", "json"
    )
    return [
        p for p in json.loads(found.stdout)["items"] if not p["metadata"].get("deletionTimestamp")
    ]


def _guest_disks(kubevirt: Any, namespace: str) -> set[str]:
    text = kubevirt.in_guest(VM, namespace, "cat /proc/partitions")
    return set(re.findall(r"\b(sd[a-z]+)\b", text))


def test_a_claim_is_hotplugged_into_a_running_guest_and_removed(
    kubevirt: Any, namespace: str
) -> None:
    kubevirt.apply(kubevirt.claim(CLAIM, "64Mi"), namespace)
    kubevirt.apply(kubevirt.vm(VM), namespace)
    vmi = kubevirt.wait_running(VM, namespace)
    assert kubevirt.marker in kubevirt.console_marker(VM, namespace)
    assert _guest_disks(kubevirt, namespace) == set()

    added = kubevirt.virtctl("addvolume", VM, f"--volume-name={CLAIM}", "-n", namespace)
    assert added.returncode == 0, added.stderr
    # As upstream's declarative hotplug: the VM's template says which volumes are plugged.
    template = kubevirt.get("vm", VM, namespace)["spec"]["template"]["spec"]
    (volume,) = [v for v in template["volumes"] if v["name"] == CLAIM]
    assert volume["persistentVolumeClaim"] == {"claimName": CLAIM, "hotpluggable": True}
    entry = _ready(kubevirt, namespace)
    device = entry["target"]
    assert re.fullmatch(r"sd[a-z]", device), entry
    assert entry["hotplugVolume"]["attachPodName"].startswith("hp-volume-")
    (pod,) = _attachment_pods(kubevirt, namespace)
    assert pod["spec"]["nodeName"] == vmi["status"]["nodeName"]
    # The same guest: no restart.
    assert kubevirt.get("vmi", VM, namespace)["metadata"]["uid"] == vmi["metadata"]["uid"]

    kubevirt.wait_for(
        f"/dev/{device} in the guest",
        lambda: device in _guest_disks(kubevirt, namespace) or None,
        60,
    )
    line = f"KVPY-HOTPLUG-{secrets.token_hex(4)}"
    kubevirt.in_guest(VM, namespace, f"echo {line} > /dev/{device} && sync")
    read = kubevirt.in_guest(VM, namespace, f"head -c {len(line)} /dev/{device}; echo")
    assert line in read
    pvc = kubevirt.get("pvc", CLAIM, namespace)
    pv = json.loads(
        kubevirt.kubectl.run("get", "pv", pvc["spec"]["volumeName"], "-o", "json").stdout
    )
    image = Path(pv["spec"]["hostPath"]["path"]) / "disk.img"
    assert image.read_bytes()[: len(line)].decode() == line  # in the claim's own disk.img

    removed = kubevirt.virtctl("removevolume", VM, f"--volume-name={CLAIM}", "-n", namespace)
    assert removed.returncode == 0, removed.stderr
    kubevirt.wait_for(
        f"/dev/{device} gone from the guest",
        lambda: device not in _guest_disks(kubevirt, namespace) or None,
        120,
    )
    kubevirt.wait_for("the volume's entry gone", lambda: _entry(kubevirt, namespace) is None, 120)
    kubevirt.wait_for(
        "the attachment pod gone", lambda: not _attachment_pods(kubevirt, namespace) or None, 120
    )
    template = kubevirt.get("vm", VM, namespace)["spec"]["template"]["spec"]
    assert CLAIM not in [v["name"] for v in template["volumes"]]
    assert kubevirt.get("vmi", VM, namespace)["metadata"]["uid"] == vmi["metadata"]["uid"]
