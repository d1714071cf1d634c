"""Every image kv-images knows: bases, service images, the node's pause image, test guests."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from kv_images.contexts import (
    BusyboxContext,
    ContextSource,
    GuestContext,
    KernelBootContext,
    PauseContext,
    RootfsContext,
    WheelsContext,
)
from kv_images.rootfs import RootfsSpec

__all__ = [
    "CATALOG",
    "IMAGE_REPOSITORY",
    "SERVICES",
    "UPSTREAM_ALIASES",
    "ImageSpec",
    "closure",
    "repository",
]

# Images are named as the kubelet normalises `kubevirt-py/<name>:<tag>` in a pod spec.
IMAGE_REPOSITORY = "docker.io/kubevirt-py"

Kind = Literal["base", "service", "node", "guest"]

PYTHON_PACKAGES = ("python3", "python3-venv")
# virt-handler programs the pod's NAT through libnftables (ctypes, virt_handler.nftables).
# In python-base rather than a base of its own: ≈ 1 MB, where another debootstrap costs
# ≈ 45 s of every cold build.
HANDLER_LIBRARIES = ("libnftables1",)
LAUNCHER_PACKAGES = (
    *PYTHON_PACKAGES,
    "qemu-system-x86",
    "qemu-utils",
    "libvirt-daemon",
    "libvirt-daemon-driver-qemu",
    "python3-libvirt",
    # EFI firmware (bootloader.efi): OVMF_CODE_4M.fd and its variable-store templates.
    "ovmf",
    # An emulated TPM (devices.tpm): libvirt runs swtpm, and swtpm_setup (with
    # swtpm_localca) manufactures a new TPM's state.
    "swtpm",
    "swtpm-tools",
    # A static shell + cp: the launcher pod's init containers copy kernels and disks out
    # of scratch guest images with it (virt-controller's launcher pod).
    "busybox-static",
)


@dataclass(frozen=True)
class ImageSpec:
    """One image: its Containerfile (workspace-relative), its context and its base image."""

    name: str
    kind: Kind
    containerfile: str
    context: ContextSource
    base: str | None = None
    build_args: Mapping[str, str] = field(default_factory=dict)

    def containerfile_path(self, workspace: Path) -> Path:
        return workspace / self.containerfile


def repository(name: str) -> str:
    """`docker.io/kubevirt-py/<name>`: the reference without a tag."""
    return f"{IMAGE_REPOSITORY}/{name}"


_CF = "tools/images/containerfiles"

_SPECS = [
    ImageSpec(
        "python-base",
        "base",
        f"{_CF}/python-base.Containerfile",
        RootfsContext(RootfsSpec("python-base", (*PYTHON_PACKAGES, *HANDLER_LIBRARIES))),
    ),
    ImageSpec(
        "launcher-base",
        "base",
        f"{_CF}/launcher-base.Containerfile",
        RootfsContext(RootfsSpec("launcher-base", LAUNCHER_PACKAGES)),
    ),
    ImageSpec("pause", "node", f"{_CF}/pause.Containerfile", PauseContext()),
    ImageSpec(
        "local-path-helper", "node", f"{_CF}/local-path-helper.Containerfile", BusyboxContext()
    ),
    ImageSpec(
        "guest-kernel-boot",
        "guest",
        f"{_CF}/guest-kernel-boot.Containerfile",
        KernelBootContext(),
    ),
    ImageSpec(
        "guest-containerdisk",
        "guest",
        f"{_CF}/guest-containerdisk.Containerfile",
        GuestContext(("disk.qcow2",)),
    ),
]

# Service -> its base; each has services/<name>/Containerfile taking BASE as a build arg.
SERVICES: Mapping[str, str] = {
    "virtctl": "python-base",
    "virt-api": "python-base",
    "virt-controller": "python-base",
    "virt-operator": "python-base",
    "virt-handler": "python-base",
    "virt-launcher": "launcher-base",
    "virt-exportserver": "python-base",
}

for _service, _base in SERVICES.items():
    _SPECS.append(
        ImageSpec(
            _service,
            "service",
            f"services/{_service}/Containerfile",
            WheelsContext(_service),
            base=_base,
        )
    )

CATALOG: Mapping[str, ImageSpec] = {spec.name: spec for spec in _SPECS}

# Upstream KubeVirt's example manifests name these images; on the local node they are
# tags of the tiny guest, so the examples run unchanged (with the tiny guest inside).
UPSTREAM_ALIASES: Mapping[str, tuple[str, ...]] = {
    "guest-containerdisk": (
        "registry:5000/kubevirt/cirros-container-disk-demo:devel",
        "registry:5000/kubevirt/fedora-with-test-tooling-container-disk:devel",
        "registry:5000/kubevirt/alpine-container-disk-demo:devel",
    ),
    "guest-kernel-boot": ("registry:5000/kubevirt/alpine-ext-kernel-boot-demo:devel",),
}


def closure(names: list[str]) -> list[str]:
    """`names` with their bases, bases first, each once; unknown names raise KeyError."""
    order: list[str] = []

    def visit(name: str) -> None:
        spec = CATALOG[name]
        if spec.base:
            visit(spec.base)
        if name not in order:
            order.append(name)

    for name in names:
        visit(name)
    return order
