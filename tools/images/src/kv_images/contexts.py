"""Build contexts: what each image's Containerfile finds next to it, made on the host.

Each source has a cheap `key` (its inputs' digest, used for the image's cache key) and a
`populate` that fills a context directory, reusing cached artifacts by that key.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from kv_images import guest
from kv_images.digest import ContentKey, file_digest
from kv_images.host import HostError, require_tools
from kv_images.progress import Progress
from kv_images.rootfs import RootfsSpec, build_rootfs
from kv_images.wheelhouse import build_wheelhouse, export_requirements
from kv_images.workspace import Layout

__all__ = [
    "BusyboxContext",
    "ContextSource",
    "GuestContext",
    "KernelBootContext",
    "PauseContext",
    "RootfsContext",
    "WheelsContext",
    "ensure_guest",
]


class ContextSource(Protocol):
    """Makes one build context."""

    def key(self, workspace: Path) -> str:
        """Digest of everything that decides the context's contents."""
        ...

    def populate(self, context: Path, workspace: Path, layout: Layout, progress: Progress) -> None:
        """Fill the (empty) `context` directory."""
        ...


def _link(source: Path, target: Path) -> None:
    """Hard link when possible (same filesystem), else copy."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


@dataclass(frozen=True)
class RootfsContext:
    """rootfs.tar: a debootstrap'd Debian tree."""

    spec: RootfsSpec

    def key(self, workspace: Path) -> str:
        return self.spec.key()

    def populate(self, context: Path, workspace: Path, layout: Layout, progress: Progress) -> None:
        tar = layout.rootfs / f"{self.spec.name}-{self.spec.key()[:16]}.tar"
        if tar.exists():
            progress.say(self.spec.name, f"rootfs cached ({tar.stat().st_size >> 20} MiB)")
        else:
            build_rootfs(self.spec, tar, layout.debs, progress)
            for old in layout.rootfs.glob(f"{self.spec.name}-*.tar"):
                if old != tar and len(old.name) == len(tar.name):
                    old.unlink(missing_ok=True)
        _link(tar, context / "rootfs.tar")


@dataclass(frozen=True)
class WheelsContext:
    """wheels/: a service's wheelhouse with requirements.txt."""

    package: str

    def key(self, workspace: Path) -> str:
        return export_requirements(workspace, self.package).key(workspace)

    def populate(self, context: Path, workspace: Path, layout: Layout, progress: Progress) -> None:
        requirements = export_requirements(workspace, self.package)
        house = layout.wheels / f"{self.package}-{requirements.key(workspace)[:16]}"
        if house.is_dir():
            progress.say(self.package, "wheelhouse cached")
        else:
            build_wheelhouse(workspace, requirements, house, progress)
            # Keep this wheelhouse and the one before it.
            older = sorted(
                (
                    d
                    for d in layout.wheels.glob(f"{self.package}-*")
                    if d != house and len(d.name) == len(house.name)
                ),
                key=lambda d: d.stat().st_mtime,
                reverse=True,
            )
            for stale in older[1:]:
                shutil.rmtree(stale, ignore_errors=True)
        target = context / "wheels"
        target.mkdir()
        for wheel in sorted(house.iterdir()):
            _link(wheel, target / wheel.name)


def _guest_key(kernel: guest.GuestKernel) -> str:
    return (
        ContentKey("guest/2")
        .add("kernel", file_digest(kernel.vmlinuz))
        .add("release", kernel.release)
        .add_all("inputs", [f"{path}={file_digest(path)}" for path in guest.guest_inputs()])
        .add("recipe", Path(guest.__file__).read_bytes())
        .hexdigest()
    )


@dataclass(frozen=True)
class GuestContext:
    """The tiny guest: `files` picks vmlinuz/initrd.img (kernel boot) or disk.qcow2."""

    files: tuple[str, ...]

    def key(self, workspace: Path) -> str:
        return (
            ContentKey("guest-context")
            .add("guest", _guest_key(guest.find_guest_kernel()))
            .add_all("file", self.files)
            .hexdigest()
        )

    def populate(self, context: Path, workspace: Path, layout: Layout, progress: Progress) -> None:
        kernel = guest.find_guest_kernel()
        built = ensure_guest(kernel, layout, progress)
        for name in self.files:
            target = context / name
            shutil.copyfile(built / name, target)
            target.chmod(0o644)


# Where upstream KubeVirt's kernel-boot demo image keeps its files (its examples name them).
_UPSTREAM_BOOT_NAMES = {"vmlinuz": "vmlinuz-virt", "initrd.img": "initramfs-virt"}


@dataclass(frozen=True)
class KernelBootContext:
    """boot.tar: /boot/vmlinuz and /boot/initrd.img, hard-linked under upstream's demo names."""

    def key(self, workspace: Path) -> str:
        return (
            ContentKey("kernel-boot-context/1")
            .add("guest", _guest_key(guest.find_guest_kernel()))
            .add_all("alias", sorted(f"{k}={v}" for k, v in _UPSTREAM_BOOT_NAMES.items()))
            .hexdigest()
        )

    def populate(self, context: Path, workspace: Path, layout: Layout, progress: Progress) -> None:
        built = ensure_guest(guest.find_guest_kernel(), layout, progress)
        with tarfile.open(context / "boot.tar", "w", format=tarfile.PAX_FORMAT) as tar:
            directory = tarfile.TarInfo("boot")
            directory.type, directory.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(directory)
            for name, alias in sorted(_UPSTREAM_BOOT_NAMES.items()):
                info = tar.gettarinfo(str(built / name), arcname=f"boot/{name}")
                info.uid = info.gid = 0
                info.uname = info.gname = "root"
                info.mode, info.mtime = 0o644, 0
                with (built / name).open("rb") as data:
                    tar.addfile(info, data)
                link = tarfile.TarInfo(f"boot/{alias}")
                link.type, link.linkname, link.mode = tarfile.LNKTYPE, f"boot/{name}", 0o644
                tar.addfile(link)


def ensure_guest(kernel: guest.GuestKernel, layout: Layout, progress: Progress) -> Path:
    """The cached directory holding vmlinuz, initrd.img and disk.qcow2 for `kernel`."""
    out = layout.guest / _guest_key(kernel)[:16]
    if (out / "disk.qcow2").exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kv-guest-", dir=out.parent) as tmp:
        stage = Path(tmp) / "guest"
        stage.mkdir()
        with progress.step("guest", f"kernel {kernel.release} + busybox initramfs + qcow2 disk"):
            shutil.copyfile(kernel.vmlinuz, stage / "vmlinuz")
            guest.build_initramfs(kernel, stage / "initrd.img")
            guest.build_disk(stage / "vmlinuz", stage / "initrd.img", stage / "disk.qcow2")
        if out.exists():
            shutil.rmtree(out)
        stage.replace(out)
    return out


@dataclass(frozen=True)
class PauseContext:
    """pause: the sandbox binary, compiled static from pause.c."""

    source: str = "tools/images/containerfiles/pause.c"

    def key(self, workspace: Path) -> str:
        return (
            ContentKey("pause/1").add("source", (workspace / self.source).read_bytes()).hexdigest()
        )

    def populate(self, context: Path, workspace: Path, layout: Layout, progress: Progress) -> None:
        require_tools({"gcc": "gcc"}, files={Path("/usr/lib/x86_64-linux-gnu/libc.a"): "libc6-dev"})
        argv = ["gcc", "-static", "-Os", "-s", "-Wall", "-Werror", "-o", str(context / "pause")]
        proc = subprocess.run(
            [*argv, str(workspace / self.source)], capture_output=True, text=True, check=False
        )
        if proc.returncode != 0:
            raise HostError(f"compiling {self.source} failed: {proc.stderr.strip()}")


# The applets local-path-provisioner's helper pod scripts run (`sh setup`, `sh teardown`).
_BUSYBOX_APPLETS = ("sh", "mkdir", "rm", "rmdir", "ls", "cat", "chmod", "chown", "truncate")
_BUSYBOX = Path("/bin/busybox")


@dataclass(frozen=True)
class BusyboxContext:
    """busybox.tar: Debian's busybox-static at /bin/busybox and links for a few applets."""

    def key(self, workspace: Path) -> str:
        return (
            ContentKey("busybox-context/1")
            .add("busybox", file_digest(_BUSYBOX) if _BUSYBOX.is_file() else "missing")
            .add_all("applet", _BUSYBOX_APPLETS)
            .hexdigest()
        )

    def populate(self, context: Path, workspace: Path, layout: Layout, progress: Progress) -> None:
        require_tools({}, files={_BUSYBOX: "busybox-static"})
        with tarfile.open(context / "busybox.tar", "w", format=tarfile.PAX_FORMAT) as tar:
            for name in ("bin", "tmp"):
                directory = tarfile.TarInfo(name)
                directory.type = tarfile.DIRTYPE
                directory.mode = 0o1777 if name == "tmp" else 0o755
                tar.addfile(directory)
            info = tar.gettarinfo(str(_BUSYBOX), arcname="bin/busybox")
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            info.mode, info.mtime = 0o755, 0
            with _BUSYBOX.open("rb") as data:
                tar.addfile(info, data)
            for applet in _BUSYBOX_APPLETS:
                link = tarfile.TarInfo(f"bin/{applet}")
                link.type, link.linkname, link.mode = tarfile.SYMTYPE, "busybox", 0o777
                tar.addfile(link)
