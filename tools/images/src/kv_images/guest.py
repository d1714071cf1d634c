"""The tiny test guest: the Debian cloud kernel, a busybox-static initramfs and a bootable disk.

The initramfs runs busybox init: it keeps a shell on ttyS0 and powers off on `poweroff` or
the ACPI power button. At boot it installs the SSH keys found on a cloud-init NoCloud disk
(label `cidata`), starts dropbear (port 22) and busybox httpd (port 80, a page naming the
hostname), asks DHCP for an address if the guest has a virtio NIC and applies the lease
(address, routes, MTU, resolv.conf, hostname), printing `GUEST_LEASE_MARKER key=value...`
and `GUEST_IP_MARKER <ip>`; GUEST_MARKER comes last; with the kernel
argument GUEST_TICK_ARG a console tick follows it (see GUEST_TICK_MARKER).

The QEMU guest agent (Debian's qemu-ga) runs on the virtio-serial port named
`org.qemu.guest_agent.0` (`GUEST_AGENT_MARKER <port>` on the console once started). For
its answers the guest has an /etc/os-release, a /sbin/shutdown (guest-shutdown execs it),
a chpasswd (guest-set-user-password), an empty /var/run/utmp
(guest-get-users: nobody logs in), and real filesystems mounted read-only: the cloud-init
disk at /mnt/cidata and the boot disk's FAT partition at /boot (guest-get-fsinfo skips
virtual filesystems, so an initramfs alone reports none), and an ext2 RAM disk at /data,
which guest-fsfreeze-freeze can freeze (vfat and iso9660 cannot).
"""

from __future__ import annotations

import gzip
import io
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kv_images.cpio import CpioEntry, write_newc
from kv_images.host import require_tools

__all__ = [
    "GUEST_AGENT_CHANNEL",
    "GUEST_AGENT_MARKER",
    "GUEST_HTTP_PAGE",
    "GUEST_IP_MARKER",
    "GUEST_LEASE_MARKER",
    "GUEST_MARKER",
    "GUEST_OS_NAME",
    "GUEST_POWEROFF_MARKER",
    "GUEST_SSH_KEYS_MARKER",
    "GUEST_TICK_ARG",
    "GUEST_TICK_MARKER",
    "PROGRAMS",
    "GuestKernel",
    "GuestLease",
    "build_disk",
    "build_initramfs",
    "find_guest_kernel",
    "guest_inputs",
]

GUEST_MARKER = "KUBEVIRT-PY-GUEST-READY"
GUEST_IP_MARKER = "KUBEVIRT-PY-GUEST-IP"
GUEST_POWEROFF_MARKER = "KUBEVIRT-PY-GUEST-POWEROFF"
GUEST_LEASE_MARKER = "KUBEVIRT-PY-GUEST-LEASE"
GUEST_SSH_KEYS_MARKER = "KUBEVIRT-PY-GUEST-SSH-KEYS"
GUEST_AGENT_MARKER = "KUBEVIRT-PY-GUEST-AGENT"
#: With this kernel argument the guest prints `GUEST_TICK_MARKER <n> <uptime>` on ttyS0
#: every 10 ms after the ready marker: whoever reads the console with its own clock sees
#: how long the guest stood still (a migration's switch-over); `n` counts up by one.
GUEST_TICK_ARG = "kubevirt_py.tick"
GUEST_TICK_MARKER = "KUBEVIRT-PY-GUEST-TICK"
#: The virtio-serial port name qemu-ga serves (KubeVirt's channel name).
GUEST_AGENT_CHANNEL = "org.qemu.guest_agent.0"
#: NAME in the guest's /etc/os-release, what guest-get-osinfo reports.
GUEST_OS_NAME = "kubevirt-py guest"
NOCLOUD_LABEL = "cidata"
#: What the guest's web page says, before its hostname.
GUEST_HTTP_PAGE = "kubevirt-py guest"
BUSYBOX = Path("/bin/busybox")
#: Dynamically linked programs copied into the guest (with the libraries `ldd` lists), by
#: path in the guest: dropbear-bin's SSH server and key generator; OpenSSH's scp (the
#: remote end of legacy `scp`) and sftp-server (of SFTP-mode `scp`), where dropbear looks;
#: the QEMU guest agent (Debian's binaries and libraries are stripped already).
PROGRAMS: Mapping[str, tuple[Path, str]] = {
    "usr/sbin/dropbear": (Path("/usr/sbin/dropbear"), "dropbear-bin"),
    "usr/bin/dropbearkey": (Path("/usr/bin/dropbearkey"), "dropbear-bin"),
    "usr/bin/scp": (Path("/usr/bin/scp"), "openssh-client"),
    "usr/lib/sftp-server": (Path("/usr/lib/openssh/sftp-server"), "openssh-sftp-server"),
    "usr/sbin/qemu-ga": (Path("/usr/sbin/qemu-ga"), "qemu-guest-agent"),
}
_SYSLINUX_MBR = Path("/usr/lib/syslinux/mbr/mbr.bin")
_PARTITION_START = 2048  # sectors: 1 MiB, the usual alignment
_FAT_SIZE_KIB = 48 * 1024

# The guest's drivers; their dependencies come from modules.dep and load first.
_MODULES = (
    "kernel/drivers/virtio/virtio_pci.ko",
    "kernel/drivers/net/virtio_net.ko",
    "kernel/drivers/block/virtio_blk.ko",
    # The cloud-init disk: ISO 9660 on virtio-blk, or a CD-ROM on virtio-scsi. The cloud
    # kernel has no AHCI driver, so a SATA cloud-init disk (the default bus) stays unseen.
    "kernel/fs/isofs/isofs.ko",
    "kernel/drivers/scsi/virtio_scsi.ko",
    "kernel/drivers/scsi/sr_mod.ko",
    # SCSI disks (/dev/sdX): hotplugged volumes land on the virtio-scsi controller.
    "kernel/drivers/scsi/sd_mod.ko",
    "kernel/drivers/input/evdev.ko",
    "kernel/drivers/acpi/button.ko",
    # The guest agent's virtio-serial port, and the boot disk's FAT partition (codepage
    # 437 and iocharset ascii are the kernel's defaults for vfat mounts).
    "kernel/drivers/char/virtio_console.ko",
    "kernel/fs/fat/vfat.ko",
    "kernel/fs/nls/nls_cp437.ko",
    "kernel/fs/nls/nls_ascii.ko",
    # A RAM disk with ext2 (ext4 is built in): the one filesystem fsfreeze can freeze.
    "kernel/drivers/block/brd.ko",
    # EFI variables at /sys/firmware/efi/efivars when booted by OVMF (bootloader.efi).
    "kernel/fs/efivarfs/efivarfs.ko",
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
# The console's shell is started directly, not through login(1): login writes root's
# session to utmp (what guest-get-users reports) but starts after the ready marker and
# drops the keys typed at it, which the console tests type at once.

# dropbear -R makes its host key at the first connection: a key made at boot would wait
# about a second for the kernel's random pool under TCG, delaying the ready marker.
# Synchronous SCSI scanning: the cloud-init CD-ROM exists once insmod returns, no polling.
_MODULE_ARGS = {"scsi_mod.ko": "scan=sync", "brd.ko": "rd_nr=1 rd_size=2048"}

# udhcpc returns once bound (then renews in the background), or after 3 unanswered
# DISCOVERs (1 s apart) and keeps asking in the background: so the lease, when a DHCP
# server answers, is on the console before the ready marker.
_RCS = f"""\
#!/bin/sh
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /run /tmp /mnt /www /etc/dropbear /var
ln -sfn /run /var/run
: > /run/utmp
mount -t devpts devpts /dev/pts
hostname guest
while read -r m args; do insmod "/lib/modules/$m" $args 2>/dev/null; done < /etc/modules
[ -d /sys/firmware/efi/efivars ] && mount -t efivarfs efivarfs /sys/firmware/efi/efivars
ip link set lo up
echo "{GUEST_HTTP_PAGE} $(hostname)" > /www/index.html
httpd -p 80 -h /www
/etc/init.d/ssh-keys
/etc/init.d/boot-fs
/etc/init.d/guest-agent
dropbear -s -R -p 22
if [ -e /sys/class/net/eth0 ]; then
    ip link set eth0 up
    udhcpc -i eth0 -s /etc/udhcpc.script -O mtu -O search -O staticroutes \\
        -t 3 -T 1 -b >/dev/null 2>&1
fi
echo "{GUEST_MARKER}" > /dev/ttyS0
if grep -qw {GUEST_TICK_ARG} /proc/cmdline; then
    (n=0; while :; do
        read -r up _ < /proc/uptime; echo "{GUEST_TICK_MARKER} $n $up"; n=$((n + 1)); usleep 10000
    done) > /dev/ttyS0 2>&1 &
fi
"""

_RCK = f"""\
#!/bin/sh
echo "{GUEST_POWEROFF_MARKER}" > /dev/ttyS0
"""

# The keys of a cloud-init NoCloud disk become root's authorized_keys: meta-data's
# "public-keys" (where KubeVirt puts accessCredentials with propagationMethod noCloud)
# and a #cloud-config user-data's ssh_authorized_keys list.
_SSH_KEYS = f"""\
#!/bin/sh
mkdir -p /root/.ssh /mnt/cidata
chmod 700 /root /root/.ssh
# busybox's findfs knows no ISO 9660: read the volume id (primary volume descriptor at
# byte 32768, id at +40, 32 bytes) of each block device instead.
for name in $(awk 'NR > 2 {{ print $4 }}' /proc/partitions); do
    label=$(dd if="/dev/$name" bs=8 skip=4101 count=4 2>/dev/null | tr -d ' \000')
    [ "$label" = {NOCLOUD_LABEL} ] && dev=/dev/$name && break
done
[ -n "$dev" ] || exit 0
# Stays mounted: the guest agent reports it as a filesystem.
mount -t iso9660 -o ro "$dev" /mnt/cidata 2>/dev/null || exit 0
{{
    [ -f /mnt/cidata/meta-data ] &&
        grep -o '"[0-9][0-9]*":"[^"]*"' /mnt/cidata/meta-data | sed 's/^"[0-9]*":"//; s/"$//'
    [ -f /mnt/cidata/user-data ] && awk '
        /^ssh_authorized_keys:/ {{ keys = 1; next }}
        keys && /^[ \\t]*- / {{ sub(/^[ \\t]*- */, ""); gsub(/^["\\047]|["\\047]$/, ""); print; next }}
        {{ keys = 0 }}' /mnt/cidata/user-data
}} > /root/.ssh/authorized_keys
chmod 600 /root/.ssh/authorized_keys
echo "{GUEST_SSH_KEYS_MARKER} $(grep -c . /root/.ssh/authorized_keys)" > /dev/ttyS0
"""

# Option 121 (classless routes, bridge binding) replaces the router option (RFC 3442);
# a gateway of 0.0.0.0 means on-link.
_UDHCPC = f"""\
#!/bin/sh
list() {{ echo $* | tr ' ' ','; }}
case "$1" in
deconfig)
    ip addr flush dev "$interface"
    ;;
bound|renew)
    [ -n "$mtu" ] && ip link set dev "$interface" mtu "$mtu"
    ip addr flush dev "$interface"
    ip addr add "$ip/${{mask:-24}}" dev "$interface"
    while ip route del default dev "$interface" 2>/dev/null; do :; done
    routes=""
    if [ -n "$staticroutes" ]; then
        set -- $staticroutes
        while [ $# -ge 2 ]; do
            if [ "$2" = 0.0.0.0 ]; then
                ip route replace "$1" dev "$interface"
            else
                ip route replace "$1" via "$2" dev "$interface" onlink
            fi
            routes="$routes${{routes:+,}}$1@$2"
            shift 2
        done
    else
        for r in $router; do ip route add default via "$r" dev "$interface"; break; done
    fi
    : > /etc/resolv.conf
    if [ -n "$search" ]; then echo "search $search" >> /etc/resolv.conf
    elif [ -n "$domain" ]; then echo "search $domain" >> /etc/resolv.conf
    fi
    for d in $dns; do echo "nameserver $d" >> /etc/resolv.conf; done
    if [ -n "$hostname" ]; then hostname "$hostname"; echo "$hostname" > /etc/hostname; fi
    echo "{GUEST_HTTP_PAGE} $(hostname)" > /www/index.html
    read -r uptime _ < /proc/uptime
    echo "{GUEST_LEASE_MARKER} ip=$ip/${{mask:-24}} router=$(list $router)" \\
        "dns=$(list $dns) search=$(list $search) domain=$domain mtu=$mtu" \\
        "hostname=$hostname routes=$routes uptime=$uptime" > /dev/ttyS0
    echo "{GUEST_IP_MARKER} $ip" > /dev/ttyS0
    ;;
esac
"""

_POWER_BUTTON = "#!/bin/sh\nexec /sbin/poweroff\n"

# The first FAT partition (the boot disk's, with syslinux) read-only at /boot, and a
# 2 MiB ext2 RAM disk at /data: vfat and iso9660 cannot be frozen, ext2 can.
_BOOT_FS = """\
#!/bin/sh
mkdir -p /boot /data
if [ -b /dev/ram0 ] && mke2fs -q /dev/ram0 2>/dev/null; then
    mount -t ext2 /dev/ram0 /data
fi
for name in $(awk 'NR > 2 && $4 ~ /^[sv]d[a-z]+[0-9]+$/ { print $4 }' /proc/partitions); do
    mount -t vfat -o ro "/dev/$name" /boot 2>/dev/null && exit 0
done
exit 0
"""

# devtmpfs makes /dev/vportNpM; only udev would add the /dev/virtio-ports/<name> links.
_GUEST_AGENT = f"""\
#!/bin/sh
for port in /sys/class/virtio-ports/*; do
    [ "$(cat "$port/name" 2>/dev/null)" = {GUEST_AGENT_CHANNEL} ] || continue
    dev=/dev/${{port##*/}}
    qemu-ga -m virtio-serial -p "$dev" -d -f /run/qemu-ga.pid -t /run &&
        echo "{GUEST_AGENT_MARKER} $dev" > /dev/ttyS0
    exit 0
done
"""

# qemu-ga's guest-set-user-password pipes "user:password" into chpasswd (-e: crypted
# already); busybox has no chpasswd here, so the hash goes into /etc/passwd (no shadow).
_CHPASSWD = """\
#!/bin/sh
[ "$1" = -e ] && crypted=1
while IFS= read -r line; do
    user=${line%%:*}
    pass=${line#*:}
    [ -n "$crypted" ] || pass=$(printf %s "$pass" | mkpasswd -m sha512 -P 0) || exit 1
    awk -F: -v OFS=: -v u="$user" -v p="$pass" \\
        '$1 == u { $2 = p; found = 1 } { print } END { exit !found }' \\
        /etc/passwd > /etc/passwd.new || {
        rm -f /etc/passwd.new
        echo "chpasswd: unknown user $user" >&2
        exit 1
    }
    mv /etc/passwd.new /etc/passwd
done
"""

# qemu-ga's guest-shutdown runs `/sbin/shutdown -h -P|-H|-r +0 <message>`; busybox has
# no shutdown, only poweroff, halt and reboot (which signal init).
_SHUTDOWN = """\
#!/bin/sh
for arg; do
    case "$arg" in
    -r) exec /sbin/reboot ;;
    -H) exec /sbin/halt ;;
    esac
done
exec /sbin/poweroff
"""

_OS_RELEASE = f"""\
PRETTY_NAME="{GUEST_OS_NAME} (busybox)"
NAME="{GUEST_OS_NAME}"
ID=kubevirt-py-guest
VERSION_ID=1
VERSION="1 (busybox)"
"""

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
class GuestLease:
    """The DHCP lease the guest applied, as its GUEST_LEASE_MARKER line says."""

    address: str  # "10.0.2.2/24"
    routers: tuple[str, ...] = ()
    dns: tuple[str, ...] = ()
    search: tuple[str, ...] = ()
    domain: str = ""
    mtu: int | None = None
    hostname: str = ""
    #: option 121 (bridge binding), each "destination/prefix@gateway"
    routes: tuple[str, ...] = field(default=())
    #: seconds since the guest's kernel started, when the lease was applied
    uptime: float | None = None

    @property
    def ip(self) -> str:
        return self.address.partition("/")[0]

    @property
    def prefix_length(self) -> int:
        return int(self.address.partition("/")[2])

    @classmethod
    def from_console(cls, text: str) -> GuestLease | None:
        """The last lease line in a console transcript, or None if there is none."""
        lines = [line for line in text.splitlines() if GUEST_LEASE_MARKER in line]
        if not lines:
            return None
        _, _, rest = lines[-1].partition(GUEST_LEASE_MARKER)
        values = dict(item.partition("=")[::2] for item in rest.split())

        def listed(key: str) -> tuple[str, ...]:
            return tuple(v for v in values.get(key, "").split(",") if v)

        mtu = values.get("mtu", "")
        return cls(
            address=values.get("ip", ""),
            routers=listed("router"),
            dns=listed("dns"),
            search=listed("search"),
            domain=values.get("domain", ""),
            mtu=int(mtu) if mtu.isdigit() else None,
            hostname=values.get("hostname", ""),
            routes=listed("routes"),
            uptime=float(values["uptime"]) if values.get("uptime") else None,
        )


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


_LDD_PATH = re.compile(r"(?:=>\s*)?(/\S+)\s+\(0x[0-9a-f]+\)")


def _libraries(program: Path) -> list[Path]:
    """The shared libraries and loader `program` needs, as `ldd` names them."""
    listing = subprocess.run(
        ["ldd", str(program)], check=True, capture_output=True, text=True
    ).stdout
    return [Path(m.group(1)) for m in _LDD_PATH.finditer(listing)]


def _program_files() -> dict[str, Path]:
    """Guest path -> host file: PROGRAMS and every library they load (each once)."""
    require_tools({"ldd": "libc-bin"}, files={host: package for host, package in PROGRAMS.values()})
    files: dict[str, Path] = {}
    for guest_path, (host, _) in PROGRAMS.items():
        files[guest_path] = host
        for library in _libraries(host):
            files.setdefault(str(library).lstrip("/"), library)
    return files


def guest_inputs() -> list[Path]:
    """Every host file copied into the initramfs besides the kernel's modules (cache key)."""
    return [BUSYBOX, *sorted(set(_program_files().values()))]


def _program_entries() -> list[CpioEntry]:
    files = _program_files()
    dirs = sorted({str(Path(p).parent) for p in files} - {"usr/bin", "usr/sbin", "lib"})
    entries = [CpioEntry.directory(d) for d in dirs]
    for guest_path, host in sorted(files.items()):
        # The file itself (symlinks resolved): a library is found by the name ldd gave.
        entries.append(CpioEntry.file(guest_path, host.resolve().read_bytes(), 0o755))
    return entries


def build_initramfs(kernel: GuestKernel, out: Path) -> None:
    """Write a gzip'd newc initramfs for `kernel` to `out`."""
    dirs = ["bin", "sbin", "usr", "usr/bin", "usr/sbin", "dev", "proc", "sys", "run", "tmp"]
    dirs += ["etc", "etc/init.d", "etc/acpi", "etc/acpi/PWRF", "root", "lib", "lib/modules"]
    dirs += ["mnt", "var"]
    entries = [CpioEntry.directory(d) for d in dirs]
    entries.append(CpioEntry.char_device("dev/console", 5, 1))
    entries.append(CpioEntry.char_device("dev/ttyS0", 4, 64, 0o660))
    entries += _busybox_entries()
    entries += _program_entries()
    entries.append(CpioEntry.symlink("init", "/bin/busybox"))
    modules: list[str] = []
    for rel in _load_order((kernel.modules / "modules.dep").read_text(), _MODULES):
        source = kernel.modules / rel
        if source.is_file():
            name = Path(rel).name
            entries.append(CpioEntry.file(f"lib/modules/{name}", source.read_bytes()))
            modules.append(f"{name} {_MODULE_ARGS.get(name, '')}".rstrip())
    entries.append(CpioEntry.file("etc/modules", "\n".join(modules).encode() + b"\n"))
    entries.append(CpioEntry.file("etc/inittab", _INITTAB.encode()))
    entries.append(CpioEntry.file("etc/init.d/rcS", _RCS.encode(), 0o755))
    entries.append(CpioEntry.file("etc/init.d/rcK", _RCK.encode(), 0o755))
    entries.append(CpioEntry.file("etc/init.d/ssh-keys", _SSH_KEYS.encode(), 0o755))
    entries.append(CpioEntry.file("etc/init.d/boot-fs", _BOOT_FS.encode(), 0o755))
    entries.append(CpioEntry.file("etc/init.d/guest-agent", _GUEST_AGENT.encode(), 0o755))
    entries.append(CpioEntry.file("sbin/shutdown", _SHUTDOWN.encode(), 0o755))
    entries.append(CpioEntry.file("usr/sbin/chpasswd", _CHPASSWD.encode(), 0o755))
    entries.append(CpioEntry.file("etc/os-release", _OS_RELEASE.encode()))
    entries.append(CpioEntry.file("etc/udhcpc.script", _UDHCPC.encode(), 0o755))
    entries.append(CpioEntry.file("etc/acpi/PWRF/00000080", _POWER_BUTTON.encode(), 0o755))
    entries.append(CpioEntry.file("etc/hostname", b"guest\n"))
    entries.append(CpioEntry.file("etc/passwd", b"root::0:0:root:/root:/bin/sh\n"))
    entries.append(CpioEntry.file("etc/group", b"root:x:0:\n"))
    entries.append(CpioEntry.file("etc/shells", b"/bin/sh\n"))
    entries.append(CpioEntry.file("etc/nsswitch.conf", b"passwd: files\ngroup: files\n"))
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
