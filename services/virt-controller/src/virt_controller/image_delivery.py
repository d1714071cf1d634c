"""How a VMI's image-borne files reach its launcher pod: containerDisks and the kernelBoot
container's kernel and initrd.

Two ways, both upstream's:

- copies (the default): an init container per image copies the files into an emptyDir.
  Guest images are usually FROM scratch, so a first init container, `container-disk-binary`,
  puts the launcher image's static busybox where the copy containers run it as `sh`.
- image volumes (the `ImageVolume` feature gate; Kubernetes ≥ 1.36 and a runtime that
  serves them, e.g. containerd ≥ 2.1): each image is a read-only `image` volume of the pod,
  mounted where the copy would have gone. No init container, no copy: the pod starts as
  soon as its images are pulled, about a second per init container sooner here.

The files land at the same paths either way, except a containerDisk without `path`: a
copy is `<volume>/disk.img`, an image volume shows the image's own `<volume>/disk/<file>`
(the launcher finds the one file there, see virt_domain.layout).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kubevirt_api import VirtualMachineInstance
from virt_domain import launcher_pod as contract

from .rendering import RenderError, check_image_path, restricted_security

__all__ = [
    "IMAGE_VOLUME_GATE",
    "ImageDelivery",
    "deliver_images",
    "uses_image_volumes",
]

#: The KubeVirt CR feature gate that turns copies into image volumes, as upstream's.
IMAGE_VOLUME_GATE = "ImageVolume"
CONTAINER_DISKS_DIR = contract.CONTAINER_DISKS.mount_path
KERNEL_BOOT_DIR = contract.KERNEL_BOOT.mount_path
INIT_DIR = contract.INIT.mount_path
BINARY_CONTAINER = "container-disk-binary"
KERNEL_BOOT_CONTAINER = "kernel-boot"


@dataclass
class ImageDelivery:
    """What the launcher pod gets for its images."""

    #: Init containers, in order (empty with image volumes).
    init_containers: list[dict[str, Any]] = field(default_factory=list)
    #: Pod volumes beyond the launcher's own emptyDirs.
    volumes: list[dict[str, Any]] = field(default_factory=list)
    #: The compute container's mounts of those volumes.
    mounts: list[dict[str, Any]] = field(default_factory=list)
    #: imagePullSecrets the images need.
    pull_secrets: list[str] = field(default_factory=list)


def uses_image_volumes(pod: Mapping[str, Any] | None) -> bool:
    """Whether a launcher pod (a migration's source) got its images as image volumes: its
    migration target must get them the same way, for the files to be at the same paths."""
    spec = (pod or {}).get("spec") or {}
    return any("image" in (v or {}) for v in spec.get("volumes") or ())


def deliver_images(
    vmi: VirtualMachineInstance, launcher_image: str, pull_policy: str, *, image_volumes: bool
) -> ImageDelivery:
    """The init containers or image volumes for `vmi`'s containerDisks and kernelBoot
    container. Raises RenderError naming the field of a missing image or a bad path."""
    delivery = ImageDelivery()
    copies: list[dict[str, Any]] = []
    for index, volume in enumerate(vmi.spec.volumes or ()):
        source = volume.container_disk
        if source is None:
            continue
        field_path = f"spec.volumes[{index}].containerDisk"
        if not source.image:
            raise RenderError(f"{field_path}.image", "required")
        src = check_image_path(source.path, f"{field_path}.path") if source.path else None
        target = f"{CONTAINER_DISKS_DIR}/{volume.name}"
        if image_volumes:
            if volume.name in contract.RESERVED_VOLUMES:
                raise RenderError(
                    f"spec.volumes[{index}].name",
                    f"{volume.name!r} is reserved for the launcher: rename the volume",
                )
            delivery.volumes.append(
                _image_volume(volume.name, source.image, source.image_pull_policy)
            )
            delivery.mounts.append({"name": volume.name, "mountPath": target, "readOnly": True})
        else:
            copies.append(
                _copy_container(
                    f"volume{volume.name}",
                    source.image,
                    source.image_pull_policy,
                    _disk_copy_script(src, target),
                    contract.CONTAINER_DISKS,
                )
            )
        if source.image_pull_secret:
            delivery.pull_secrets.append(source.image_pull_secret)
    firmware = vmi.spec.domain.firmware
    boot = firmware.kernel_boot if firmware is not None else None
    if boot is not None and boot.container is not None:
        c = boot.container
        field_path = "spec.domain.firmware.kernelBoot.container"
        paths = [
            check_image_path(p, f"{field_path}.{n}")
            for n, p in (("kernelPath", c.kernel_path), ("initrdPath", c.initrd_path))
            if p
        ]
        if not paths:
            raise RenderError(field_path, "needs kernelPath or initrdPath")
        volume_name = contract.KERNEL_BOOT.name
        if image_volumes:
            delivery.volumes.append(_image_volume(volume_name, c.image, c.image_pull_policy))
            delivery.mounts.append(
                {"name": volume_name, "mountPath": KERNEL_BOOT_DIR, "readOnly": True}
            )
        else:
            delivery.volumes.append({"name": volume_name, "emptyDir": {}})
            delivery.mounts.append(_mount(contract.KERNEL_BOOT))
            steps = [
                f"mkdir -p {shlex.quote((KERNEL_BOOT_DIR + p).rsplit('/', 1)[0])}; "
                f"cp {shlex.quote(p)} {shlex.quote(KERNEL_BOOT_DIR + p)}"
                for p in paths
            ]
            copies.append(
                _copy_container(
                    KERNEL_BOOT_CONTAINER,
                    c.image,
                    c.image_pull_policy,
                    "set -eu; " + "; ".join(steps),
                    contract.KERNEL_BOOT,
                )
            )
        if c.image_pull_secret:
            delivery.pull_secrets.append(c.image_pull_secret)
    if copies:
        delivery.init_containers = [_binary_container(launcher_image, pull_policy), *copies]
        delivery.volumes.append({"name": contract.INIT.name, "emptyDir": {}})
    return delivery


def _image_volume(name: str, image: str, pull_policy: str | None) -> dict[str, Any]:
    return {
        "name": name,
        "image": {"reference": image, "pullPolicy": pull_policy or "IfNotPresent"},
    }


def _disk_copy_script(src: str | None, target: str) -> str:
    if src is not None:
        dest = target + src
        return (
            f"set -eu; mkdir -p {shlex.quote(dest.rsplit('/', 1)[0])}; "
            f"cp {shlex.quote(src)} {shlex.quote(dest)}"
        )
    # Upstream's convention: the image's one disk file lives under /disk/.
    return (
        f"set -eu; mkdir -p {shlex.quote(target)}; "
        f'for f in /disk/*; do cp "$f" {shlex.quote(target + "/disk.img")}; exit 0; done; '
        'echo "no disk file under /disk/ in the containerDisk image" >&2; exit 1'
    )


def _support_resources() -> dict[str, Any]:
    # Upstream's minimal init-container resources.
    return {
        "requests": {"cpu": "10m", "memory": "1M"},
        "limits": {"cpu": "100m", "memory": "40M"},
    }


def _mount(volume: contract.PodVolume) -> dict[str, Any]:
    return {"name": volume.name, "mountPath": volume.mount_path}


def _copy_container(
    name: str, image: str, pull_policy: str | None, script: str, volume: contract.PodVolume
) -> dict[str, Any]:
    # Guest images are usually FROM scratch: the copy runs the static busybox (as `sh`)
    # that the `container-disk-binary` init container put into the shared init dir.
    return {
        "name": name,
        "image": image,
        "imagePullPolicy": pull_policy or "IfNotPresent",
        "command": [f"{INIT_DIR}/sh", "-c", script],
        "volumeMounts": [
            _mount(volume),
            {"name": contract.INIT.name, "mountPath": INIT_DIR, "readOnly": True},
        ],
        "resources": _support_resources(),
        "securityContext": restricted_security(),
    }


def _binary_container(launcher_image: str, pull_policy: str) -> dict[str, Any]:
    """Copies the launcher image's static busybox into the init dir for the copy containers."""
    return {
        "name": BINARY_CONTAINER,
        "image": launcher_image,
        "imagePullPolicy": pull_policy,
        # busybox picks its applet from argv[0]: a copy named `sh` is a shell.
        "command": ["/bin/busybox", "cp", "/bin/busybox", f"{INIT_DIR}/sh"],
        "volumeMounts": [_mount(contract.INIT)],
        "resources": _support_resources(),
        "securityContext": restricted_security(),
    }
