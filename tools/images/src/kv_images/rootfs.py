"""Base root filesystems from Debian packages, made by `debootstrap --variant=minbase`.

The result is a tar of the tree (sorted, numeric owners) that a base Containerfile ADDs.
Downloaded .debs are kept in one cache dir so the second base fetches only what it adds.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from kv_images.digest import ContentKey
from kv_images.host import HostError, require_tools
from kv_images.progress import Progress

__all__ = ["DEBIAN_MIRROR", "DEBIAN_SUITE", "RootfsSpec", "build_rootfs"]

DEBIAN_SUITE = "bookworm"
DEBIAN_MIRROR = "http://deb.debian.org/debian"
# Trimmed after install: nothing at run time reads them.
_PRUNE = (
    "var/cache/apt/archives",
    "var/lib/apt/lists",
    "usr/share/doc",
    "usr/share/man",
    "usr/share/info",
    "usr/share/locale",
    "var/log",
)


@dataclass(frozen=True)
class RootfsSpec:
    """What goes into one base rootfs: the Debian packages on top of minbase."""

    name: str
    packages: tuple[str, ...]
    suite: str = DEBIAN_SUITE
    mirror: str = DEBIAN_MIRROR

    def key(self) -> str:
        return (
            ContentKey("rootfs/1")
            .add("suite", self.suite)
            .add("mirror", self.mirror)
            .add_all("package", sorted(self.packages))
            .add_all("prune", _PRUNE)
            .hexdigest()
        )


def build_rootfs(spec: RootfsSpec, out: Path, deb_cache: Path, progress: Progress) -> None:
    """debootstrap `spec` and write its tree as a tar to `out` (atomically)."""
    require_tools({"debootstrap": "debootstrap", "tar": "tar"})
    deb_cache.mkdir(parents=True, exist_ok=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"kv-rootfs-{spec.name}-", dir=out.parent) as tmp:
        target = Path(tmp) / "rootfs"
        argv = [
            "debootstrap",
            "--variant=minbase",
            f"--cache-dir={deb_cache}",
            f"--include={','.join(spec.packages)}",
            spec.suite,
            str(target),
            spec.mirror,
        ]
        with progress.step(
            spec.name, f"debootstrap {spec.suite} with {len(spec.packages)} packages"
        ):
            _run_streamed(argv, spec.name, progress)
        for rel in _PRUNE:
            path = target / rel
            if path.is_dir():
                shutil.rmtree(path)
                path.mkdir()
        # The runtime (containerd, buildah) provides these per container.
        for rel in ("etc/resolv.conf", "etc/hostname"):
            (target / rel).unlink(missing_ok=True)
        partial = out.with_suffix(".partial")
        with progress.step(spec.name, "writing rootfs tar"):
            subprocess.run(
                [
                    "tar",
                    "--sort=name",
                    "--numeric-owner",
                    "--xattrs",
                    "-C",
                    str(target),
                    "-cf",
                    str(partial),
                    ".",
                ],
                check=True,
            )
        partial.replace(out)


def _run_streamed(argv: list[str], subject: str, progress: Progress) -> None:
    tail: list[str] = []
    with subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.rstrip()
            progress.detail(subject, line)
            tail = [*tail[-19:], line]
    if proc.returncode != 0:
        raise HostError(
            f"{subject}: `{' '.join(argv[:2])} …` failed (exit {proc.returncode}):\n  "
            + "\n  ".join(tail)
        )
