"""The tiny guest boots under plain QEMU (TCG) from both artifacts, and powers itself off."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import pytest
from kv_images import (
    GUEST_MARKER,
    GUEST_POWEROFF_MARKER,
    Layout,
    Progress,
    ensure_guest,
    find_guest_kernel,
)


@pytest.fixture(scope="module")
def guest_dir() -> Path:
    return ensure_guest(find_guest_kernel(), Layout.default(), Progress())


def _boot_then_poweroff(boot: list[str], tmp_path: Path) -> str:
    sock = tmp_path / "serial.sock"
    qemu = subprocess.Popen(
        [
            "qemu-system-x86_64",
            "-accel",
            "tcg",
            "-m",
            "256",
            "-display",
            "none",
            "-nodefaults",
            "-no-reboot",
            "-chardev",
            f"socket,path={sock},server=on,wait=on,id=s0",
            "-serial",
            "chardev:s0",
            *boot,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 10
        while not sock.exists():
            assert qemu.poll() is None, qemu.stderr.read() if qemu.stderr else ""
            assert time.monotonic() < deadline, "QEMU made no serial socket"
            time.sleep(0.05)
        console = socket.socket(socket.AF_UNIX)
        console.connect(str(sock))
        console.settimeout(60)
        seen = b""
        while GUEST_MARKER.encode() not in seen:
            chunk = console.recv(4096)
            assert chunk, f"console closed before the marker: {seen[-500:]!r}"
            seen += chunk
        console.sendall(b"poweroff\n")
        while chunk := console.recv(4096):
            seen += chunk
        assert qemu.wait(timeout=60) == 0
        return seen.decode(errors="replace")
    finally:
        if qemu.poll() is None:
            qemu.kill()
            qemu.wait()


def test_kernel_and_initramfs_boot_to_the_marker(guest_dir: Path, tmp_path: Path) -> None:
    boot = ["-kernel", str(guest_dir / "vmlinuz"), "-initrd", str(guest_dir / "initrd.img")]
    log = _boot_then_poweroff([*boot, "-append", "console=ttyS0"], tmp_path)
    assert GUEST_POWEROFF_MARKER in log


def test_qcow2_disk_bios_boots_to_the_marker(guest_dir: Path, tmp_path: Path) -> None:
    drive = f"file={guest_dir / 'disk.qcow2'},if=virtio,format=qcow2,snapshot=on"
    log = _boot_then_poweroff(["-drive", drive], tmp_path)
    assert "SYSLINUX" in log
    assert GUEST_POWEROFF_MARKER in log
