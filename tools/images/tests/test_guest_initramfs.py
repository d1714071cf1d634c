"""The tiny guest's initramfs: busybox init, the marker on ttyS0, modules in load order."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from kv_images.guest import BUSYBOX, GUEST_MARKER, GuestKernel, build_initramfs

pytestmark = pytest.mark.skipif(not BUSYBOX.is_file(), reason="needs busybox-static")


def _fake_kernel(tmp_path: Path) -> GuestKernel:
    modules = tmp_path / "modules"
    for rel in ("kernel/a/virtio.ko", "kernel/a/virtio_ring.ko", "kernel/a/virtio_pci.ko"):
        (modules / rel).parent.mkdir(parents=True, exist_ok=True)
        (modules / rel).write_bytes(b"\x7fELF" + rel.encode())
    (modules / "modules.dep").write_text(
        "kernel/a/virtio.ko: kernel/a/virtio_ring.ko\n"
        "kernel/a/virtio_ring.ko:\n"
        "kernel/a/virtio_pci.ko: kernel/a/virtio.ko kernel/a/virtio_ring.ko\n"
    )
    return GuestKernel("test", tmp_path / "vmlinuz", modules)


def test_initramfs_holds_init_marker_and_ordered_modules(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import kv_images.guest as guest

    monkeypatch.setattr(guest, "_MODULES", ("kernel/a/virtio_pci.ko",))
    out = tmp_path / "initrd.img"
    build_initramfs(_fake_kernel(tmp_path), out)
    data = gzip.decompress(out.read_bytes())
    assert b"init\0" in data
    assert b"etc/inittab\0" in data
    assert GUEST_MARKER.encode() in data
    assert b"virtio_ring.ko\nvirtio.ko\nvirtio_pci.ko\n" in data
    assert b"ttyS0::respawn:-/bin/sh" in data
