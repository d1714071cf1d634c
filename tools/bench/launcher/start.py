"""Guest start through virt-launcher versus bare QEMU (printed, never judged).

Run: ``uv run python tools/bench/launcher/start.py [--rounds N]`` (as root, or as the
unprivileged user libvirtd should run as).

Both sides boot the same tiny guest (tools/images' kernel + busybox initramfs) under
TCG and stop the clock when its marker shows up on the serial console:

- bare: ``qemu-system-x86_64 -accel tcg -kernel … -initrd …`` spawned → marker;
- launcher: ``SyncVirtualMachine`` sent to a running virt-launcher → marker read from
  the serial console socket. "cold" is the first sync of a fresh launcher (libvirt
  probes QEMU's capabilities then); "warm" syncs again after a Kill.

The ratio is launcher ÷ bare (median of the rounds).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pwd
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from kv_images.guest import GUEST_MARKER, build_initramfs, find_guest_kernel
from virt_rpc import (
    CmdStub,
    SyncOptions,
    SyncVirtualMachineRequest,
    VmiRef,
    VmiRequest,
    negotiate,
    open_channel,
)

__all__ = ["main"]

CACHE = Path.home() / ".cache" / "kubevirt-py" / "guest"


def tiny_guest() -> tuple[Path, Path]:
    """The kv_images tiny guest (kernel, initrd), built once into the cache."""
    kernel = find_guest_kernel()
    cache = CACHE / f"kv-images-{kernel.release}"
    vmlinuz, initrd = cache / "vmlinuz", cache / "initrd.img"
    if not initrd.exists():
        cache.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(kernel.vmlinuz, vmlinuz)
        build_initramfs(kernel, initrd)
    return vmlinuz, initrd


async def bare_qemu(vmlinuz: Path, initrd: Path) -> float:
    """Seconds from spawning QEMU to the marker on its serial port."""
    start = time.monotonic()
    qemu = await asyncio.create_subprocess_exec(
        "qemu-system-x86_64", "-accel", "tcg", "-machine", "q35", "-m", "128",
        "-display", "none", "-no-reboot", "-nodefaults", "-serial", "stdio",
        "-kernel", str(vmlinuz), "-initrd", str(initrd), "-append", "console=ttyS0 panic=-1",
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    assert qemu.stdout is not None
    seen = b""
    try:
        while GUEST_MARKER.encode() not in seen:
            chunk = await asyncio.wait_for(qemu.stdout.read(4096), 120)
            if not chunk:
                raise RuntimeError("qemu exited before the marker")
            seen += chunk
        return time.monotonic() - start
    finally:
        qemu.kill()
        await qemu.wait()


def _user() -> tuple[int, int] | None:
    if os.geteuid() != 0:
        return None
    try:
        entry = pwd.getpwuid(107)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--uid", "107", "--user-group", "--no-create-home",
             "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", "kubevirt-qemu"],
            check=True,
        )  # fmt: skip
        entry = pwd.getpwuid(107)
    return entry.pw_uid, entry.pw_gid


async def _marker_on(socket: Path, within: float = 120.0) -> None:
    deadline = time.monotonic() + within
    while True:
        try:
            reader, writer = await asyncio.open_unix_connection(str(socket))
            break
        except (FileNotFoundError, ConnectionRefusedError):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.005)
    seen = b""
    try:
        while GUEST_MARKER.encode() not in seen:
            chunk = await asyncio.wait_for(reader.read(4096), deadline - time.monotonic())
            if not chunk:
                raise RuntimeError("serial console closed before the marker")
            seen += chunk
    finally:
        writer.close()


def _launcher_dirs(vmlinuz: Path, initrd: Path) -> Path:
    base = Path(tempfile.mkdtemp(prefix="kvb-", dir="/tmp"))
    base.chmod(0o755)
    for sub in ("sockets", "private", "ephemeral", "container-disks", "kernel-boot/boot"):
        (base / sub).mkdir(parents=True, mode=0o755)
    shutil.copyfile(vmlinuz, base / "kernel-boot/boot/vmlinuz")
    shutil.copyfile(initrd, base / "kernel-boot/boot/initrd.img")
    return base


async def launcher_rounds(vmlinuz: Path, initrd: Path, rounds: int) -> tuple[float, list[float]]:
    """(cold sync → marker, [warm sync → marker, ...]) through one virt-launcher process."""
    base = await asyncio.to_thread(_launcher_dirs, vmlinuz, initrd)
    uid = str(uuid.uuid4())
    argv = [
        sys.executable, "-m", "virt_launcher", "--name", "bench", "--namespace", "default",
        "--uid", uid, "--sockets-dir", str(base / "sockets"),
        "--private-dir", str(base / "private"), "--libvirt-dir", str(base / "lv"),
        "--ephemeral-disk-dir", str(base / "ephemeral"),
        "--container-disk-dir", str(base / "container-disks"),
        "--kernel-boot-dir", str(base / "kernel-boot"), "--grace-period-seconds", "0",
    ]  # fmt: skip
    user = _user()
    if user is not None:
        argv += ["--libvirtd-user", f"{user[0]}:{user[1]}"]
    log = (base / "launcher.log").open("wb")
    launcher = await asyncio.create_subprocess_exec(*argv, stdout=log, stderr=log)
    ready = base / "sockets" / "launcher-sock"
    while not ready.exists():
        if launcher.returncode is not None:
            raise RuntimeError((base / "launcher.log").read_text())
        await asyncio.sleep(0.05)
    channel = await open_channel(ready)
    try:
        await negotiate(channel, "bench", "0")
        cmd = CmdStub(channel, timeout=180)
        ref = VmiRef(namespace="default", name="bench", uid=uid)
        vmi = {
            "apiVersion": "kubevirt.io/v1",
            "kind": "VirtualMachineInstance",
            "metadata": {"name": "bench", "namespace": "default", "uid": uid},
            "spec": {
                "domain": {
                    "firmware": {
                        "kernelBoot": {
                            "kernelArgs": "console=ttyS0 panic=-1",
                            "container": {
                                "image": "localhost/kubevirt-py/tiny-guest:latest",
                                "kernelPath": "/boot/vmlinuz",
                                "initrdPath": "/boot/initrd.img",
                            },
                        }
                    },
                    "devices": {"autoattachPodInterface": False, "autoattachMemBalloon": False},
                    "resources": {"requests": {"memory": "128Mi"}},
                }
            },
        }
        request = SyncVirtualMachineRequest(
            vmi=ref, vmi_json=json.dumps(vmi), options=SyncOptions(use_emulation=True)
        )
        serial = base / "private" / uid / "virt-serial0"
        timings = []
        for _ in range(rounds + 1):
            start = time.monotonic()
            await cmd.sync_virtual_machine(request)
            await _marker_on(serial)
            timings.append(time.monotonic() - start)
            await cmd.kill(VmiRequest(vmi=ref))
        return timings[0], timings[1:]
    finally:
        channel.close()
        launcher.send_signal(signal.SIGTERM)
        await launcher.wait()
        log.close()
        shutil.rmtree(base, ignore_errors=True)


async def run(rounds: int) -> None:
    vmlinuz, initrd = tiny_guest()
    bare = [await bare_qemu(vmlinuz, initrd) for _ in range(rounds)]
    cold, warm = await launcher_rounds(vmlinuz, initrd, rounds)
    b, w = statistics.median(bare), statistics.median(warm)
    print(
        f"bare qemu spawn -> marker:        median {b:.2f}s  ({', '.join(f'{x:.2f}' for x in bare)})"
    )
    print(
        f"launcher cold sync -> marker:     {cold:.2f}s (includes libvirt's QEMU capability probe)"
    )
    print(
        f"launcher warm sync -> marker:     median {w:.2f}s  ({', '.join(f'{x:.2f}' for x in warm)})"
    )
    print(f"ratio warm launcher / bare qemu:  {w / b:.2f}")
    print(f"ratio cold launcher / bare qemu:  {cold / b:.2f}")


def main() -> None:
    """Run the comparison and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(run(args.rounds))


if __name__ == "__main__":
    main()
