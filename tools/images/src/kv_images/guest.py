"""The tiny test guest: the Debian cloud kernel, a busybox-static initramfs and a bootable disk.

The initramfs runs busybox init: it prints GUEST_MARKER on ttyS0, keeps a shell on ttyS0,
powers off on `poweroff` or the ACPI power button, and asks DHCP for an address if the
guest has a virtio NIC (printing `GUEST_IP_MARKER <ip>` when it gets one).
"""

from __future__ import annotations

import gzip
import io
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from kv_images.cpio import CpioEntry, write_newc
from kv_images.host import require_tools

__all__ = [
    "GUEST_IP_MARKER",
    "GUEST_MARKER",
    "GUEST_POWEROFF_MARKER",
    "GuestKernel",
    "build_disk",
    "build_initramfs",
    "find_guest_kernel",
]

GUEST_MARKER = "KUBEVIRT-PY-GUEST-READY"
GUEST_IP_MARKER = "KUBEVIRT-PY-GUEST-IP"
GUEST_POWEROFF_MARKER = "KUBEVIRT-PY-GUEST-POWEROFF"
BUSYBOX = Path("/bin/busybox")
_SYSLINUX_MBR = Path("/usr/lib/syslinux/mbr/mbr.bin")
_PARTITION_START = 2048  # sectors: 1 MiB, the usual alignment
_FAT_SIZE_KIB = 48 * 1024

# The guest's drivers; their dependencies come from modules.dep and load first.
_MODULES = (
    "kernel/drivers/virtio/virtio_pci.ko",
    "kernel/drivers/net/virtio_net.ko",
    "kernel/drivers/block/virtio_blk.ko",
    "kernel/drivers/input/evdev.ko",
    "kernel/drivers/acpi/button.ko",
)


def _load_order(modules_dep: str, wanted: tuple[str, ...]) -> list[str]:
    """`wanted` and their dependencies, each after everything it depends on."""
    deps: dict[str, list[str]] = {}
    for line in modules_dep.splitlines():
        name, _, rest = line.partition(":")
        deps[name.strip()] = rest.split()
    order: list[str] = []

    def visit(module: str) -> None:
        if module in order or module not in deps:
            return
        for dep in deps[module]:
            visit(dep)
        order.append(module)

    for module in wanted:
        visit(module)
    return order


_INITTAB = """\
::sysinit:/etc/init.d/rcS
ttyS0::respawn:-/bin/sh
::respawn:/sbin/acpid -f -c /etc/acpi -l /run/acpid.log
::ctrlaltdel:/sbin/poweroff
::shutdown:/etc/init.d/rcK
"""
# acpid (respawned by init): the ACPI power button, which a graceful VM stop presses, powers off.

_RCS = f"""\
#!/bin/sh
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /run /tmp
mount -t devpts devpts /dev/pts
hostname guest
for m in $(cat /etc/modules); do insmod "/lib/modules/$m" 2>/dev/null; done
ip link set lo up
if [ -e /sys/class/net/eth0 ]; then
    ip link set eth0 up
    udhcpc -i eth0 -s /etc/udhcpc.script -t 10 -T 1 -b -q >/dev/null 2>&1 &
fi
echo "{GUEST_MARKER}" > /dev/ttyS0
"""

_RCK = f"""\
#!/bin/sh
echo "{GUEST_POWEROFF_MARKER}" > /dev/ttyS0
"""

_UDHCPC = f"""\
#!/bin/sh
case "$1" in
bound|renew)
    ip addr flush dev "$interface"
    ip addr add "$ip/${{mask:-24}}" dev "$interface"
    for r in $router; do ip route add default via "$r" dev "$interface"; break; done
    echo "{GUEST_IP_MARKER} $ip" > /dev/ttyS0
    ;;
esac
"""

_POWER_BUTTON = "#!/bin/sh\nexec /sbin/poweroff\n"

_SYSLINUX_CFG = """\
SERIAL 0 115200
DEFAULT guest
PROMPT 0
TIMEOUT 0
LABEL guest
  LINUX /vmlinuz
  INITRD /initrd.img
  APPEND console=ttyS0 panic=-1
"""


@dataclass(frozen=True)
class GuestKernel:
    """The host's Debian cloud kernel: its image and its modules directory."""

    release: str
    vmlinuz: Path
    modules: Path


def find_guest_kernel(boot: Path = Path("/boot"), lib: Path = Path("/lib/modules")) -> GuestKernel:
    """The newest installed `*-cloud-amd64` kernel; raises HostError naming the package if none."""
    from kv_images.host import HostError

    def version_key(path: Path) -> list[int]:
        return [int(n) for n in re.findall(r"\d+", path.name)]

    candidates = sorted(boot.glob("vmlinuz-*-cloud-amd64"), key=version_key)
    for vmlinuz in reversed(candidates):
        release = vmlinuz.name.removeprefix("vmlinuz-")
        if (lib / release / "modules.dep").is_file():
            return GuestKernel(release, vmlinuz, lib / release)
    raise HostError(
        "no Debian cloud kernel found (/boot/vmlinuz-*-cloud-amd64 with its modules); "
        "install it with: apt-get install linux-image-cloud-amd64"
    )


def _busybox_entries() -> list[CpioEntry]:
    require_tools({"busybox": "busybox-static"}, paths={"busybox": BUSYBOX})
    listing = subprocess.run(
        [str(BUSYBOX), "--list-full"], check=True, capture_output=True, text=True
    ).stdout.split()
    entries = [CpioEntry.file("bin/busybox", BUSYBOX.read_bytes(), 0o755)]
    for applet in sorted(set(listing)):
        if applet != "bin/busybox":
            entries.append(CpioEntry.symlink(applet, "/bin/busybox"))
    return entries


def build_initramfs(kernel: GuestKernel, out: Path) -> None:
    """Write a gzip'd newc initramfs for `kernel` to `out`."""
    dirs = ["bin", "sbin", "usr", "usr/bin", "usr/sbin", "dev", "proc", "sys", "run", "tmp"]
    dirs += ["etc", "etc/init.d", "etc/acpi", "etc/acpi/PWRF", "root", "lib", "lib/modules"]
    entries = [CpioEntry.directory(d) for d in dirs]
    entries.append(CpioEntry.char_device("dev/console", 5, 1))
    entries.append(CpioEntry.char_device("dev/ttyS0", 4, 64, 0o660))
    entries += _busybox_entries()
    entries.append(CpioEntry.symlink("init", "/bin/busybox"))
    modules: list[str] = []
    for rel in _load_order((kernel.modules / "modules.dep").read_text(), _MODULES):
        source = kernel.modules / rel
        if source.is_file():
            name = Path(rel).name
            entries.append(CpioEntry.file(f"lib/modules/{name}", source.read_bytes()))
            modules.append(name)
    entries.append(CpioEntry.file("etc/modules", "\n".join(modules).encode() + b"\n"))
    entries.append(CpioEntry.file("etc/inittab", _INITTAB.encode()))
    entries.append(CpioEntry.file("etc/init.d/rcS", _RCS.encode(), 0o755))
    entries.append(CpioEntry.file("etc/init.d/rcK", _RCK.encode(), 0o755))
    entries.append(CpioEntry.file("etc/udhcpc.script", _UDHCPC.encode(), 0o755))
    entries.append(CpioEntry.file("etc/acpi/PWRF/00000080", _POWER_BUTTON.encode(), 0o755))
    entries.append(CpioEntry.file("etc/hostname", b"guest\n"))
    entries.append(CpioEntry.file("etc/passwd", b"root::0:0:root:/root:/bin/sh\n"))
    entries.append(CpioEntry.file("etc/group", b"root:x:0:\n"))
    buf = io.BytesIO()
    write_newc(buf, entries)
    tmp = out.with_suffix(".tmp")
    with tmp.open("wb") as f, gzip.GzipFile(fileobj=f, mode="wb", mtime=0) as gz:
        gz.write(buf.getvalue())
    tmp.replace(out)


def build_disk(vmlinuz: Path, initrd: Path, out: Path) -> None:
    """Write a qcow2 disk that BIOS-boots `vmlinuz` + `initrd` through syslinux on a FAT partition.

    Nothing is mounted: mtools writes the files and syslinux installs itself into the image.
    """
    require_tools(
        {
            "mkfs.fat": "dosfstools",
            "syslinux": "syslinux",
            "mcopy": "mtools",
            "sfdisk": "fdisk",
            "qemu-img": "qemu-utils",
        },
        files={_SYSLINUX_MBR: "syslinux-common"},
    )
    with tempfile.TemporaryDirectory(prefix="kv-guest-disk-") as tmpdir:
        tmp = Path(tmpdir)
        part = tmp / "part.img"
        _run(
            [
                "mkfs.fat",
                "-F",
                "16",
                "-n",
                "GUEST",
                "-i",
                "6b767079",
                "-C",
                str(part),
                str(_FAT_SIZE_KIB),
            ]
        )
        _run(["syslinux", "--install", str(part)])
        cfg = tmp / "syslinux.cfg"
        cfg.write_text(_SYSLINUX_CFG)
        for source, name in ((vmlinuz, "vmlinuz"), (initrd, "initrd.img"), (cfg, "syslinux.cfg")):
            _run(["mcopy", "-o", "-i", str(part), str(source), f"::{name}"])
        raw = tmp / "disk.raw"
        part_bytes = part.stat().st_size
        with raw.open("wb") as f:
            f.truncate(_PARTITION_START * 512 + part_bytes)
        table = (
            f"label: dos\nstart={_PARTITION_START}, size={part_bytes // 512}, type=6, bootable\n"
        )
        _run(["sfdisk", "--quiet", "--no-reread", "--no-tell-kernel", str(raw)], stdin=table)
        with raw.open("r+b") as f:
            f.write(_SYSLINUX_MBR.read_bytes()[:440])
            f.seek(_PARTITION_START * 512)
            with part.open("rb") as p:
                shutil.copyfileobj(p, f)
        tmp_out = out.with_suffix(".tmp")
        _run(
            ["qemu-img", "convert", "-q", "-f", "raw", "-O", "qcow2", "-c", str(raw), str(tmp_out)]
        )
        tmp_out.replace(out)


def _run(argv: list[str], stdin: str | None = None) -> None:
    from kv_images.host import HostError

    proc = subprocess.run(argv, input=stdin, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise HostError(f"{argv[0]} failed (exit {proc.returncode}): {proc.stderr.strip()}")
