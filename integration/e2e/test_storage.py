"""A VM's data on a PersistentVolumeClaim of the default StorageClass (local-path).

The guest writes a line to its PVC disk (a raw virtio disk, /dev/vda of the kernel-boot
guest, which has no root disk), the VM is stopped and started, and the line is read back
from the new guest; the same with a Block claim of `local-block` (a loop device, handed
to the launcher as /dev/data). The VMI reports the claim in status.volumeStatus, and a ReadWriteOnce
local-path claim makes it not live-migratable with upstream's reason. A VM with a
dataVolumeTemplate is refused, naming CDI.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from pathlib import Path
from typing import Any

from kv_cluster.kubectl import KubectlError

CLAIM = "data"
SIZE = "64Mi"
SIZE_BYTES = 64 << 20
QEMU_UID = 107


def _condition(vmi: dict[str, Any], kind: str) -> dict[str, Any] | None:
    found = [c for c in vmi.get("status", {}).get("conditions", []) if c["type"] == kind]
    return found[0] if found else None


def test_guest_data_on_a_pvc_survives_stop_and_start(kubevirt: Any, namespace: str) -> None:
    created = time.monotonic()
    kubevirt.apply(kubevirt.claim(CLAIM, SIZE), namespace)
    kubevirt.apply(kubevirt.with_claim_disk(kubevirt.vm("stateful"), CLAIM), namespace)

    def bound() -> dict[str, Any] | None:
        pvc = kubevirt.get("pvc", CLAIM, namespace)
        return pvc if pvc and pvc["status"].get("phase") == "Bound" else None

    pvc = kubevirt.wait_for(f"PVC {CLAIM} Bound", bound, 120)
    print(f"e2e storage: PVC bound {time.monotonic() - created:.1f}s after it was created")
    assert pvc["spec"]["storageClassName"] == "local-path"
    vmi = kubevirt.wait_running("stateful", namespace)
    print(f"e2e storage: VMI Running {time.monotonic() - created:.1f}s after the PVC was created")

    (status,) = [s for s in vmi["status"]["volumeStatus"] if s["name"] == "data"]
    info = status["persistentVolumeClaimInfo"]
    assert info["claimName"] == CLAIM
    assert info["accessModes"] == ["ReadWriteOnce"]
    assert info["volumeMode"] == "Filesystem"
    assert info["capacity"]["storage"] == SIZE

    migratable = kubevirt.wait_for(
        "LiveMigratable judged",
        lambda: _condition(kubevirt.get("vmi", "stateful", namespace) or {}, "LiveMigratable"),
        60,
    )
    assert migratable["status"] == "False"
    assert migratable["reason"] == "DisksNotLiveMigratable"
    assert migratable["message"] == (
        f"cannot migrate VMI: PVC {CLAIM} is not shared, live migration requires that all "
        "PVCs must be shared (using ReadWriteMany access mode)"
    )

    # The claim's directory on the VMI's node holds the launcher's disk.img.
    pv = json.loads(
        kubevirt.kubectl.run("get", "pv", pvc["spec"]["volumeName"], "-o", "json").stdout
    )
    directory = Path(pv["spec"]["hostPath"]["path"])
    assert f"/nodes/{vmi['status']['nodeName']}/local-path/" in str(directory)
    image = directory / "disk.img"
    found = os.stat(image)
    assert (found.st_uid, found.st_size) == (QEMU_UID, SIZE_BYTES)

    assert kubevirt.marker in kubevirt.console_marker("stateful", namespace)
    line = f"KVPY-STORAGE-{secrets.token_hex(4)}"
    kubevirt.in_guest("stateful", namespace, f"echo {line} > /dev/vda && sync")

    kubevirt.stop("stateful", namespace)
    assert image.read_bytes()[: len(line)].decode() == line  # on the volume, not in a guest

    started = kubevirt.virtctl("start", "stateful", "-n", namespace)
    assert started.returncode == 0, started.stderr
    again = kubevirt.wait_running("stateful", namespace)
    assert again["metadata"]["uid"] != vmi["metadata"]["uid"]
    assert kubevirt.marker in kubevirt.console_marker("stateful", namespace)
    read = kubevirt.in_guest("stateful", namespace, f"head -c {len(line)} /dev/vda; echo")
    assert line in read
    assert os.stat(image).st_ino == found.st_ino  # the same image, not a new one

    # Deleting the VM and the claim removes the volume's directory (reclaim policy Delete).
    kubevirt.kubectl.run("delete", "vm", "stateful", "-n", namespace, "--wait=true")
    kubevirt.wait_for(
        "the VMI to be gone", lambda: kubevirt.get("vmi", "stateful", namespace) is None, 120
    )
    kubevirt.wait_no_launcher_pods(namespace)
    deleted = time.monotonic()
    kubevirt.kubectl.run("delete", "pvc", CLAIM, "-n", namespace, "--wait=true")
    kubevirt.wait_for("the volume's directory removed", lambda: not directory.exists(), 120)
    print(f"e2e storage: volume directory removed {time.monotonic() - deleted:.1f}s after delete")


def test_a_block_claim_is_the_guests_disk_across_stop_and_start(
    kubevirt: Any, namespace: str
) -> None:
    claim = kubevirt.claim("raw", SIZE)
    claim["spec"].update(
        {
            "storageClassName": "local-block",
            "volumeMode": "Block",
            "resources": {"requests": {"storage": "256Mi"}},
        }
    )
    kubevirt.apply(claim, namespace)
    kubevirt.apply(kubevirt.with_claim_disk(kubevirt.vm("raw"), "raw"), namespace)
    vmi = kubevirt.wait_running("raw", namespace)
    (status,) = [s for s in vmi["status"]["volumeStatus"] if s["name"] == "data"]
    assert status["persistentVolumeClaimInfo"]["volumeMode"] == "Block"
    pod = json.loads(
        kubevirt.kubectl.run(
            "get", "pods", "-n", namespace, "-l", "kubevirt.io=virt-launcher", "-o", "json"
        ).stdout
    )["items"][0]
    (compute,) = [c for c in pod["spec"]["containers"] if c["name"] == "compute"]
    assert compute["volumeDevices"] == [{"name": "data", "devicePath": "/dev/data"}]

    assert kubevirt.marker in kubevirt.console_marker("raw", namespace)
    line = f"KVPY-BLOCK-{secrets.token_hex(4)}"
    kubevirt.in_guest("raw", namespace, f"echo {line} > /dev/vda && sync")
    kubevirt.stop("raw", namespace)
    started = kubevirt.virtctl("start", "raw", "-n", namespace)
    assert started.returncode == 0, started.stderr
    kubevirt.wait_running("raw", namespace)
    assert kubevirt.marker in kubevirt.console_marker("raw", namespace)
    assert line in kubevirt.in_guest("raw", namespace, f"head -c {len(line)} /dev/vda; echo")


def test_a_vm_with_a_data_volume_template_is_refused_naming_cdi(
    kubevirt: Any, namespace: str
) -> None:
    vm = kubevirt.vm("imported")
    spec = vm["spec"]["template"]["spec"]
    spec["domain"]["devices"]["disks"] = [{"name": "root", "disk": {"bus": "virtio"}}]
    spec["volumes"] = [{"name": "root", "dataVolume": {"name": "imported-root"}}]
    vm["spec"]["dataVolumeTemplates"] = [
        {
            "metadata": {"name": "imported-root"},
            "spec": {
                "storage": {"resources": {"requests": {"storage": SIZE}}},
                "source": {"blank": {}},
            },
        }
    ]
    try:
        kubevirt.apply(vm, namespace)
    except KubectlError as exc:
        refusal = str(exc)
    else:
        raise AssertionError("a VM with a dataVolumeTemplate was admitted")
    assert "spec.dataVolumeTemplates[0]" in refusal
    assert "spec.template.spec.volumes[0].dataVolume" in refusal
    assert "CDI" in refusal
    assert kubevirt.get("vm", "imported", namespace) is None
    assert (
        json.loads(kubevirt.kubectl.run("get", "vm", "-n", namespace, "-o", "json").stdout)["items"]
        == []
    )
