"""VirtualMachineExport end to end: a guest's bytes on its PVC come back through
`virtctl vmexport download`.

The guest writes a line at offset 0 of its PVC disk (/dev/vda of the kernel-boot guest),
the VM is stopped, and `virtctl vmexport download --vm` creates the export, waits for the
exporter pod (virt-exportserver, the PVC mounted read-only) to be Ready, downloads
`disk.img` over HTTPS (TLS checked against status.links.internal.cert, the token from the
generated Secret) and deletes the export. The file starts with the line. Once through the
Service's ClusterIP (raw), once through the API server's pod port-forward (gzip). A VM
with only a containerDisk is Skipped with reason VMNoVolumes, and download says so.
"""

from __future__ import annotations

import gzip
import secrets
from pathlib import Path
from typing import Any

SIZE = "64Mi"
SIZE_BYTES = 64 << 20


def _export(name: str, source: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "export.kubevirt.io/v1",
        "kind": "VirtualMachineExport",
        "metadata": {"name": name},
        "spec": {"source": source},
    }


def test_download_yields_the_bytes_the_guest_wrote(
    kubevirt: Any, namespace: str, tmp_path: Path
) -> None:
    kubevirt.apply(kubevirt.claim("data", SIZE), namespace)
    kubevirt.apply(kubevirt.with_claim_disk(kubevirt.vm("exported"), "data"), namespace)
    kubevirt.wait_running("exported", namespace)
    assert kubevirt.marker in kubevirt.console_marker("exported", namespace)
    line = f"KVPY-EXPORT-{secrets.token_hex(6)}"
    kubevirt.in_guest("exported", namespace, f"echo {line} > /dev/vda && sync")

    kubevirt.stop("exported", namespace)

    raw = tmp_path / "disk.img"
    fetched = kubevirt.virtctl(
        "vmexport", "download", "exp-raw", "--vm", "exported", "-n", namespace,
        "--output", str(raw), "--format", "raw", "--readiness-timeout", "180",
        timeout=300,
    )  # fmt: skip
    assert fetched.returncode == 0, fetched.stderr
    assert raw.stat().st_size == SIZE_BYTES
    with raw.open("rb") as image:
        assert image.read(len(line)).decode() == line
    # Deleted after the download (no --keep-vme), with its exporter pod.
    kubevirt.wait_for(
        "export exp-raw deleted",
        lambda: kubevirt.get("vmexport", "exp-raw", namespace) is None,
        60,
    )

    packed = tmp_path / "disk.img.gz"
    forwarded = kubevirt.virtctl(
        "vmexport", "download", "exp-gz", "--vm", "exported", "-n", namespace,
        "--output", str(packed), "--port-forward", "--readiness-timeout", "180",
        timeout=300,
    )  # fmt: skip
    assert forwarded.returncode == 0, forwarded.stderr
    with gzip.open(packed, "rb") as image:
        assert image.read(len(line)).decode() == line


def test_a_container_disk_vm_is_skipped(kubevirt: Any, namespace: str, tmp_path: Path) -> None:
    kubevirt.apply(kubevirt.vm("diskless", "Halted", containerdisk=True), namespace)
    source = {"apiGroup": "kubevirt.io", "kind": "VirtualMachine", "name": "diskless"}
    kubevirt.apply(_export("skip", source), namespace)

    def skipped() -> dict[str, Any] | None:
        export = kubevirt.get("vmexport", "skip", namespace)
        phase = ((export or {}).get("status") or {}).get("phase")
        return export if phase == "Skipped" else None

    export = kubevirt.wait_for("export Skipped", skipped, 60)
    (ready,) = [c for c in export["status"]["conditions"] if c["type"] == "Ready"]
    assert (ready["status"], ready["reason"]) == ("False", "VMNoVolumes")
    assert kubevirt.get("pod", "virt-export-skip", namespace) is None

    refused = kubevirt.virtctl(
        "vmexport", "download", "skip", "-n", namespace, "--output", str(tmp_path / "none")
    )
    assert refused.returncode == 1
    assert "is Skipped (VMNoVolumes" in refused.stderr
