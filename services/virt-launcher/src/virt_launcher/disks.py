"""Files the domain's disks need before it is defined: containerDisk overlays.

A containerDisk's image (copied into the pod by an init container) stays read-only;
the guest writes to a qcow2 overlay in the ephemeral dir whose backing file is that
image, as upstream does. Blocking (runs qemu-img): call it off the event loop.
"""

from __future__ import annotations

import json
import os
import subprocess

from kubevirt_api import VirtualMachineInstance
from virt_domain.layout import LauncherLayout

from virt_launcher.conversion import VmiRejectedError

__all__ = ["prepare_container_disk_overlays"]


def _format(image: str) -> str:
    info = subprocess.run(
        ["qemu-img", "info", "--output=json", image],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    if info.returncode != 0:
        return "raw"
    found = json.loads(info.stdout).get("format")
    return found if found in ("qcow2", "raw") else "raw"


def prepare_container_disk_overlays(vmi: VirtualMachineInstance, layout: LauncherLayout) -> None:
    """Create the missing overlay of every containerDisk volume (existing ones are kept)."""
    for index, volume in enumerate(vmi.spec.volumes or ()):
        source = volume.container_disk
        if source is None:
            continue
        image = layout.container_disk_image(volume.name, source.path)
        overlay = layout.overlay_image(volume.name)
        if os.path.lexists(overlay):
            continue
        if not os.path.isfile(image) or os.path.islink(image):
            raise VmiRejectedError(
                f"spec.volumes[{index}].containerDisk",
                f"the image file {image} is missing from the pod (was the disk copied?)",
            )
        os.makedirs(os.path.dirname(overlay), exist_ok=True)
        made = subprocess.run(
            ["qemu-img", "create", "-f", "qcow2", "-F", _format(image), "-b", image, overlay],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        if made.returncode != 0:
            raise VmiRejectedError(
                f"spec.volumes[{index}].containerDisk", f"overlay: {made.stderr.strip()}"
            )
