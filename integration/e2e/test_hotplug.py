"""Volume hotplug: a PVC attached to a running guest and taken away again, without a restart.

`virtctl addvolume` puts the claim on the VMI (hotpluggable); virt-controller's attachment
pod mounts it on the VMI's node, virt-handler binds its disk.img into the launcher, the
launcher attaches it on the guest's virtio-scsi controller and the guest sees a new
/dev/sdX. The guest writes a line to it, which lands in the claim's disk.img on the node.
`virtctl removevolume` detaches it: the device goes from the guest, the entry from
volumeStatus, the attachment pod from the cluster. As upstream's declarative hotplug, both
go through the VM's template, which virt-controller brings the running VMI in line with.

Then, on the same guest (one boot serves both: memory dumps ride on the hotplug
machinery), `virtctl memory-dump get --create-claim` dumps the guest's memory into a new
claim: a string only the guest's shell ever put together is found in the dump file on
the claim, whose name the VM's status and the claim's annotation give; `memory-dump
remove` ends the association.
"""

from __future__ import annotations

import json
import re
import secrets
from pathlib import Path
from typing import Any

CLAIM = "hot"
DUMP_CLAIM = "dump"
VM = "hotplug"


def _entry_of(kubevirt: Any, namespace: str, volume: str) -> dict[str, Any] | None:
    vmi = kubevirt.get("vmi", VM, namespace) or {}
    found = [s for s in vmi.get("status", {}).get("volumeStatus", []) if s["name"] == volume]
    return found[0] if found else None


def _entry(kubevirt: Any, namespace: str) -> dict[str, Any] | None:
    return _entry_of(kubevirt, namespace, CLAIM)


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


def test_a_claim_is_hotplugged_and_removed_then_the_guest_memory_is_dumped(
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

    _memory_dump(kubevirt, namespace)


def _dump_request(kubevirt: Any, namespace: str) -> dict[str, Any] | None:
    request: dict[str, Any] | None = (
        kubevirt.get("vm", VM, namespace).get("status", {}).get("memoryDumpRequest")
    )
    return request


def _memory_dump(kubevirt: Any, namespace: str) -> None:
    """The guest's memory into a claim virtctl creates, then the association removed."""
    token = secrets.token_hex(6)
    # Put together by the guest's shell: the whole string exists only in guest memory.
    kubevirt.in_guest(VM, namespace, f'a=KVPY-MEMDUMP; b={token}; echo "$a-$b" > /tmp/mark')
    got = kubevirt.virtctl(
        "memory-dump", "get", VM, f"--claim-name={DUMP_CLAIM}", "--create-claim", "-n", namespace
    )
    assert got.returncode == 0, got.stderr
    assert f"PVC {namespace}/{DUMP_CLAIM} created" in got.stdout
    assert f"Successfully submitted memory dump request of VM {VM}" in got.stdout

    def completed() -> dict[str, Any] | None:
        request = _dump_request(kubevirt, namespace)
        return request if request and request.get("phase") in ("Completed", "Failed") else None

    request = kubevirt.wait_for(
        "the memory dump Completed",
        completed,
        300,
        explain=lambda: json.dumps(
            [_dump_request(kubevirt, namespace), _entry_of(kubevirt, namespace, DUMP_CLAIM)]
        ),
    )
    assert request["phase"] == "Completed", request
    file_name = request["fileName"]
    assert re.fullmatch(rf"{VM}-{DUMP_CLAIM}-\d{{8}}-\d{{6}}\.memory\.dump", file_name)
    assert request["startTimestamp"] <= request["endTimestamp"]
    pvc = kubevirt.get("pvc", DUMP_CLAIM, namespace)
    assert pvc["metadata"]["annotations"]["kubevirt.io/memory-dump"] == file_name
    pv = json.loads(
        kubevirt.kubectl.run("get", "pv", pvc["spec"]["volumeName"], "-o", "json").stdout
    )
    dump = (Path(pv["spec"]["hostPath"]["path"]) / file_name).read_bytes()
    assert dump[:4] == b"\x7fELF"  # libvirt's raw memory-only dump is an ELF core
    assert f"KVPY-MEMDUMP-{token}".encode() in dump
    # Done: the volume left the VMI (the VM's template keeps it until it is removed).
    kubevirt.wait_for(
        "the dump volume's entry gone",
        lambda: _entry_of(kubevirt, namespace, DUMP_CLAIM) is None or None,
        120,
    )
    vmi_volumes = kubevirt.get("vmi", VM, namespace)["spec"]["volumes"]
    assert DUMP_CLAIM not in [v["name"] for v in vmi_volumes]
    template = kubevirt.get("vm", VM, namespace)["spec"]["template"]["spec"]
    (volume,) = [v for v in template["volumes"] if v["name"] == DUMP_CLAIM]
    assert volume["memoryDump"] == {"claimName": DUMP_CLAIM, "hotpluggable": True}

    removed = kubevirt.virtctl("memory-dump", "remove", VM, "-n", namespace)
    assert removed.returncode == 0, removed.stderr
    kubevirt.wait_for(
        "the memory dump association removed",
        lambda: _dump_request(kubevirt, namespace) is None or None,
        120,
    )
    template = kubevirt.get("vm", VM, namespace)["spec"]["template"]["spec"]
    assert DUMP_CLAIM not in [v["name"] for v in template["volumes"]]
