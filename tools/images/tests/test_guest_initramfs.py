"""The tiny guest's initramfs: busybox init, the marker on ttyS0, modules in load order."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from kv_images.guest import (
    _MODULES,
    BUSYBOX,
    GUEST_LEASE_MARKER,
    GUEST_MARKER,
    GUEST_SSH_KEYS_MARKER,
    GuestKernel,
    GuestLease,
    _load_order,
    build_initramfs,
)

needs_busybox = pytest.mark.skipif(not BUSYBOX.is_file(), reason="needs busybox-static")
_TRUE = Path("/bin/true")  # a dynamically linked program every Debian has (coreutils)


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


@pytest.fixture
def initramfs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> bytes:
    import kv_images.guest as guest

    monkeypatch.setattr(guest, "_MODULES", ("kernel/a/virtio_pci.ko",))
    monkeypatch.setattr(guest, "_MODULE_ARGS", {"virtio.ko": "opt=1"})
    monkeypatch.setattr(guest, "PROGRAMS", {"usr/bin/true": (_TRUE, "coreutils")})
    out = tmp_path / "initrd.img"
    build_initramfs(_fake_kernel(tmp_path), out)
    return gzip.decompress(out.read_bytes())


@needs_busybox
def test_initramfs_holds_init_marker_and_ordered_modules(initramfs: bytes) -> None:
    assert b"init\0" in initramfs
    assert b"etc/inittab\0" in initramfs
    assert GUEST_MARKER.encode() in initramfs
    assert b"virtio_ring.ko\nvirtio.ko opt=1\nvirtio_pci.ko\n" in initramfs
    # The console shell starts at once (no login(1): it would drop keys typed at it).
    assert b"ttyS0::respawn:-/bin/sh" in initramfs
    assert b"usr/sbin/chpasswd\0" in initramfs


@needs_busybox
def test_programs_come_with_the_libraries_ldd_lists(initramfs: bytes) -> None:
    assert b"usr/bin/true\0" in initramfs
    assert b"/libc.so.6\0" in initramfs  # under lib/<triplet>/, as ldd names it
    assert b"lib64/ld-linux-x86-64.so.2\0" in initramfs
    assert _TRUE.read_bytes()[:4096] in initramfs


@needs_busybox
def test_network_services_and_key_install_are_in_the_boot_script(initramfs: bytes) -> None:
    for needed in (b"etc/init.d/ssh-keys\0", b"etc/udhcpc.script\0"):
        assert needed in initramfs
    assert b"httpd -p 80 -h /www" in initramfs
    assert b"dropbear -s -R -p 22" in initramfs
    assert GUEST_LEASE_MARKER.encode() in initramfs
    assert GUEST_SSH_KEYS_MARKER.encode() in initramfs


def test_lease_line_parses_into_its_fields() -> None:
    console = (
        "boot noise\r\n"
        f"{GUEST_LEASE_MARKER} ip=10.0.2.2/24 router=10.0.2.1 dns=10.96.0.10,10.96.0.11 "
        "search=ns.svc.cluster.local,svc.cluster.local domain=cluster.local mtu=1450 "
        "hostname=vm-network routes= uptime=1.87\r\n"
        f"{GUEST_MARKER}\r\n"
    )
    lease = GuestLease.from_console(console)
    assert lease == GuestLease(
        address="10.0.2.2/24",
        routers=("10.0.2.1",),
        dns=("10.96.0.10", "10.96.0.11"),
        search=("ns.svc.cluster.local", "svc.cluster.local"),
        domain="cluster.local",
        mtu=1450,
        hostname="vm-network",
        uptime=1.87,
    )
    assert (lease.ip, lease.prefix_length) == ("10.0.2.2", 24)


def test_bridge_lease_keeps_its_classless_routes_and_the_last_lease_wins() -> None:
    console = (
        f"{GUEST_LEASE_MARKER} ip=10.0.2.2/24 router=10.0.2.1 dns= search= domain= mtu= "
        "hostname= routes=\n"
        f"{GUEST_LEASE_MARKER} ip=10.244.0.7/24 router=10.244.0.1 dns= search= domain= mtu= "
        "hostname=b routes=10.0.0.0/8@10.244.0.254,0.0.0.0/0@10.244.0.1\n"
    )
    lease = GuestLease.from_console(console)
    assert lease is not None
    assert lease.address == "10.244.0.7/24"
    assert lease.mtu is None
    assert lease.uptime is None
    assert lease.dns == ()
    assert lease.routes == ("10.0.0.0/8@10.244.0.254", "0.0.0.0/0@10.244.0.1")


def test_no_lease_line_is_none() -> None:
    assert GuestLease.from_console(f"{GUEST_MARKER}\n") is None


@needs_busybox
def test_guest_agent_starts_on_its_port_with_what_its_commands_read(initramfs: bytes) -> None:
    from kv_images.guest import GUEST_AGENT_CHANNEL, GUEST_AGENT_MARKER, GUEST_OS_NAME

    assert b"etc/init.d/guest-agent\0" in initramfs
    assert f"= {GUEST_AGENT_CHANNEL} ]".encode() in initramfs
    assert b'qemu-ga -m virtio-serial -p "$dev" -d -f /run/qemu-ga.pid -t /run' in initramfs
    assert GUEST_AGENT_MARKER.encode() in initramfs
    assert f'NAME="{GUEST_OS_NAME}"'.encode() in initramfs  # etc/os-release
    assert b"sbin/shutdown\0" in initramfs
    assert b"-r) exec /sbin/reboot" in initramfs  # guest-shutdown mode=reboot
    assert b": > /run/utmp" in initramfs
    assert b"mount -t ext2 /dev/ram0 /data" in initramfs  # a freezable filesystem


# The cloud kernel's own dependency lines (6.1) for the guest's SCSI drivers.
_SCSI_DEPS = """\
kernel/drivers/scsi/scsi_common.ko:
kernel/drivers/scsi/scsi_mod.ko: kernel/drivers/scsi/scsi_common.ko
kernel/drivers/virtio/virtio_ring.ko:
kernel/drivers/virtio/virtio.ko: kernel/drivers/virtio/virtio_ring.ko
kernel/drivers/cdrom/cdrom.ko:
kernel/drivers/scsi/virtio_scsi.ko: kernel/drivers/scsi/scsi_mod.ko kernel/drivers/scsi/scsi_common.ko kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko
kernel/drivers/scsi/sr_mod.ko: kernel/drivers/scsi/scsi_mod.ko kernel/drivers/scsi/scsi_common.ko kernel/drivers/cdrom/cdrom.ko
kernel/drivers/scsi/sd_mod.ko: kernel/drivers/scsi/scsi_mod.ko kernel/drivers/scsi/scsi_common.ko
"""


def test_the_guest_sees_scsi_disks_hotplugged_on_virtio_scsi() -> None:
    order = _load_order(_SCSI_DEPS, _MODULES)
    assert "kernel/drivers/scsi/virtio_scsi.ko" in order
    assert "kernel/drivers/scsi/sd_mod.ko" in order  # /dev/sdX
    assert order.index("kernel/drivers/scsi/scsi_mod.ko") < order.index(
        "kernel/drivers/scsi/sd_mod.ko"
    )
