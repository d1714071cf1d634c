"""A bare libvirt live migration of the tiny guest between two libvirtds on this host.

What `virsh -c <source> migrate --live --p2p --copy-storage-all --xml <dest.xml>
--migrateuri unix://… --disks-uri unix://… <guest> <dest uri>` does, through the same
libvirt call virsh makes for `--p2p` (virDomainMigrateToURI3), with the same flags
(LIVE | PEER2PEER | NON_SHARED_DISK) and parameters. The guest is the one kubevirt-py
runs (kv_images' kernel and initramfs, 128 MiB, one vCPU, TCG, a 16 MiB qcow2 disk that
is copied along), with no NIC. Each libvirtd is the launcher's own kind
(virt_launcher.libvirtd: session mode, a private socket dir, a host uuid of its own, run
as uid 107 when we are root), so nothing here is shared but the host. Memory and disk
streams go over unix sockets: nothing leaves the machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import libvirt
from kv_images.guest import GUEST_TICK_ARG
from ticks import Switchover, TickLog, follow_socket, switchover
from virt_launcher.libvirtd import Libvirtd, LibvirtdPaths

__all__ = ["BareResult", "bare_round", "virsh_equivalent"]

NAME = "kv-bench-migration"
FLAGS = (
    libvirt.VIR_MIGRATE_LIVE | libvirt.VIR_MIGRATE_PEER2PEER | libvirt.VIR_MIGRATE_NON_SHARED_DISK
)
DISK_SIZE = "16M"
MEMORY_MIB = 128
#: Ticks seen on the source before the migration starts: the guest has settled.
SETTLED_TICKS = 100


@dataclass(frozen=True)
class BareResult:
    """One bare migration."""

    seconds: float
    switch: Switchover | None
    #: libvirt's own figures for the finished job (downtime in ms, bytes), as far as it has them
    stats: dict[str, Any]


def virsh_equivalent(source_uri: str, dest_uri: str, base: Path) -> str:
    """The virsh command line this migration is."""
    return (
        f"virsh -c '{source_uri}' migrate --live --p2p --copy-storage-all "
        f"--xml {base}/dest.xml --migrateuri unix://{base}/memory.sock "
        f"--disks-uri unix://{base}/disks.sock {NAME} '{dest_uri}'"
    )


def _domain_xml(vmlinuz: Path, initrd: Path, disk: Path, serial: Path) -> str:
    return f"""<domain type='qemu'>
  <name>{NAME}</name>
  <memory unit='MiB'>{MEMORY_MIB}</memory>
  <vcpu>1</vcpu>
  <os>
    <type arch='x86_64' machine='q35'>hvm</type>
    <kernel>{vmlinuz}</kernel>
    <initrd>{initrd}</initrd>
    <cmdline>console=ttyS0 panic=-1 {GUEST_TICK_ARG}</cmdline>
  </os>
  <on_reboot>destroy</on_reboot>
  <devices>
    <disk type='file' device='disk'>
      <driver name='qemu' type='qcow2' cache='none'/>
      <source file='{disk}'/>
      <target dev='vda' bus='virtio'/>
    </disk>
    <serial type='unix'>
      <source mode='bind' path='{serial}'/>
      <target port='0'/>
    </serial>
    <memballoon model='none'/>
  </devices>
</domain>
"""


def _prepare(base: Path, guest: Path, user: tuple[int, int] | None) -> None:
    base.chmod(0o755)
    shutil.copyfile(guest / "vmlinuz", base / "vmlinuz")
    shutil.copyfile(guest / "initrd.img", base / "initrd.img")
    for side in ("source", "dest"):
        subprocess.run(
            ["qemu-img", "create", "-q", "-f", "qcow2", str(base / f"{side}.qcow2"), DISK_SIZE],
            check=True,
        )
    if user is not None:
        for path in (base, *base.iterdir()):
            os.chown(path, *user)


async def _wait_ticks(log: TickLog, count: int, within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while len(log.ticks) < count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: {len(log.ticks)} guest ticks within {within:g}s")
        await asyncio.sleep(0.05)


def _completed_stats(uri: str) -> dict[str, Any]:
    conn = libvirt.open(uri)
    try:
        stats: dict[str, Any] = conn.lookupByName(NAME).jobStats(
            libvirt.VIR_DOMAIN_JOB_STATS_COMPLETED
        )
        return stats
    except libvirt.libvirtError:
        return {}
    finally:
        conn.close()


def _destroy(uri: str) -> None:
    # A session libvirtd leaves its QEMUs running when it stops: end the guest first.
    with contextlib.suppress(libvirt.libvirtError):
        conn = libvirt.open(uri)
        try:
            conn.lookupByName(NAME).destroy()
        finally:
            conn.close()


def _start(uri: str, xml: str) -> tuple[Any, Any]:
    conn = libvirt.open(uri)
    return conn, conn.createXML(xml, 0)


async def bare_round(guest: Path, user: tuple[int, int] | None) -> tuple[BareResult, str]:
    """One migration between two fresh libvirtds; (its figures, the virsh command line)."""
    base = Path(tempfile.mkdtemp(prefix="kvbm-", dir="/tmp"))
    source = Libvirtd(LibvirtdPaths(base / "s"), user=user)
    dest = Libvirtd(LibvirtdPaths(base / "d"), user=user)
    tasks: list[asyncio.Task[None]] = []
    conn = None
    try:
        await asyncio.to_thread(_prepare, base, guest, user)
        await asyncio.gather(source.start(), dest.start())
        serial = {side: base / f"{side}.serial" for side in ("source", "dest")}
        xml = _domain_xml(
            base / "vmlinuz", base / "initrd.img", base / "source.qcow2", serial["source"]
        )
        conn, dom = await asyncio.to_thread(_start, source.uri, xml)
        source_ticks, dest_ticks = TickLog(), TickLog()
        tasks.append(asyncio.create_task(follow_socket(serial["source"], source_ticks)))
        await _wait_ticks(source_ticks, SETTLED_TICKS, 120, "the guest booting on the source")
        migratable = await asyncio.to_thread(dom.XMLDesc, libvirt.VIR_DOMAIN_XML_MIGRATABLE)
        dest_xml = migratable.replace(str(base / "source.qcow2"), str(base / "dest.qcow2"))
        dest_xml = dest_xml.replace(str(serial["source"]), str(serial["dest"]))
        await asyncio.to_thread((base / "dest.xml").write_text, dest_xml)
        tasks.append(asyncio.create_task(follow_socket(serial["dest"], dest_ticks)))
        params = {
            libvirt.VIR_MIGRATE_PARAM_URI: f"unix://{base}/memory.sock",
            libvirt.VIR_MIGRATE_PARAM_DISKS_URI: f"unix://{base}/disks.sock",
            libvirt.VIR_MIGRATE_PARAM_DEST_XML: dest_xml,
        }
        started = time.monotonic()
        await asyncio.to_thread(dom.migrateToURI3, dest.uri, params, FLAGS)
        seconds = time.monotonic() - started
        await _wait_ticks(dest_ticks, 20, 30, "the guest ticking on the target")
        stats = await asyncio.to_thread(_completed_stats, dest.uri)
        result = BareResult(seconds, switchover(source_ticks, dest_ticks, started), stats)
        return result, virsh_equivalent(source.uri, dest.uri, base)
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, OSError, RuntimeError):
                await task
        if conn is not None:
            with contextlib.suppress(libvirt.libvirtError):
                await asyncio.to_thread(conn.close)
        for daemon in (source, dest):
            if daemon.pid is not None:
                await asyncio.to_thread(_destroy, daemon.uri)
        await asyncio.gather(source.stop(), dest.stop())
        await asyncio.to_thread(shutil.rmtree, base, True)
