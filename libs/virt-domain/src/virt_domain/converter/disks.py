"""Disks: one ``<disk>`` per ``devices.disks`` entry, backed by its volume.

Targets are named like KubeVirt does (``vda``, ``vdb``… for virtio; ``sda``… shared by
sata, scsi and usb): a disk keeps the target ``status.volumeStatus`` reports for it, the
others take the first free name of their family, in disk order. Kept targets matter
to hotplug: a disk added to or removed from the running guest never renames another.
Every path comes from the launcher layout.

A hotpluggable claim volume (``persistentVolumeClaim``/``dataVolume`` with
``hotpluggable: true``) becomes a disk only while its image is in the pod
(``ConverterOptions.hotplug_volumes``): a raw file in the hotplug-disks directory, on
the scsi bus unless its disk names one, never with a boot order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kubevirt_api.diskserial import disk_serial_problem
from kubevirt_api.models import Disk as VmiDisk
from kubevirt_api.models import Volume

from ..devices import (
    Address,
    Alias,
    BackingStore,
    BackingStoreFormat,
    BlockIO,
    BootOrder,
    Disk,
    DiskDriver,
    DiskIOThread,
    DiskIOThreads,
    DiskSource,
    DiskTarget,
)
from ..errors import ConversionError
from ..layout import check_component, check_image_path
from ..schema import Domain
from .context import Context
from .iothreads import plan

__all__ = ["BUSES", "configure", "device_index", "device_name"]

BUSES = ("virtio", "sata", "scsi", "usb")
_PREFIX = {"virtio": "vd", "sata": "sd", "scsi": "sd", "usb": "sd"}
# amd64 default bus: SATA works in every guest without drivers (KubeVirt does the same).
_DEFAULT_BUS = "sata"
# Hotplugged disks: SATA cannot take a disk while the guest runs, SCSI can (upstream's default).
_HOTPLUG_BUS = "scsi"
_HOTPLUG_BUSES = ("scsi", "virtio")
_CACHES = ("none", "writethrough", "writeback")
_IO_MODES = ("native", "threads", "default")
_ERROR_POLICIES = ("stop", "ignore", "report", "enospace")
_UNSERVED = {
    "downward_metrics": "downwardMetrics volumes need the metrics channel, which is not served",
    "memory_dump": "a memoryDump volume holds a memory dump and backs no disk",
    "container_path": "containerPath volumes are not served by this launcher",
}


def device_name(prefix: str, index: int) -> str:
    """The index-th guest device name: vda…vdz, vdaa… (bijective base 26)."""
    name = ""
    while index >= 0:
        name = chr(ord("a") + index % 26) + name
        index = index // 26 - 1
    return prefix + name


@dataclass(slots=True)
class _Target:
    device: str  # disk | lun | cdrom
    bus: str
    readonly: bool
    tray: str | None
    path: str  # field path of the target, for errors


def device_index(prefix: str, dev: str) -> int | None:
    """The index `device_name` gives ``dev`` for ``prefix``, or None if it gives none."""
    letters = dev[len(prefix) :] if dev.startswith(prefix) else ""
    if not letters or not all("a" <= c <= "z" for c in letters):
        return None
    index = 0
    for letter in letters:
        index = index * 26 + ord(letter) - ord("a") + 1
    return index - 1


def _target(disk: VmiDisk, path: str, default_bus: str = _DEFAULT_BUS) -> _Target:
    chosen = [
        (kind, value)
        for kind, value in (("disk", disk.disk), ("lun", disk.lun), ("cdrom", disk.cdrom))
        if value is not None
    ]
    if len(chosen) > 1:
        raise ConversionError(
            path, f"set only one of disk, lun, cdrom (got {', '.join(k for k, _ in chosen)})"
        )
    if not chosen:
        return _Target("disk", default_bus, False, None, f"{path}.disk")
    kind = chosen[0][0]
    field = f"{path}.{kind}"
    bus = default_bus
    if kind == "disk" and disk.disk is not None:
        bus = str(disk.disk.bus) if disk.disk.bus else bus
        readonly, tray = bool(disk.disk.readonly), None
    elif kind == "lun" and disk.lun is not None:
        # A LUN passes SCSI commands through, so only a SCSI-capable bus makes sense.
        bus = str(disk.lun.bus) if disk.lun.bus else "scsi"
        readonly, tray = bool(disk.lun.readonly), None
    else:
        assert disk.cdrom is not None
        bus = str(disk.cdrom.bus) if disk.cdrom.bus else bus
        readonly = disk.cdrom.readonly is not False
        tray = disk.cdrom.tray or "closed"
        if tray not in ("open", "closed"):
            raise ConversionError(
                f"{field}.tray", f"unknown tray state {tray!r}; valid: open, closed"
            )
    if bus not in BUSES:
        raise ConversionError(f"{field}.bus", f"unknown bus {bus!r}; valid: {', '.join(BUSES)}")
    if kind == "cdrom" and bus == "virtio":
        raise ConversionError(f"{field}.bus", "a cdrom cannot sit on virtio; use sata or scsi")
    if kind == "lun" and bus not in ("scsi", "virtio"):
        raise ConversionError(f"{field}.bus", f"a lun needs the scsi or virtio bus, not {bus!r}")
    return _Target(kind, bus, readonly, tray, field)


def _serial(field: str, serial: str | None) -> str | None:
    if not serial:
        return None
    problem = disk_serial_problem(serial)
    if problem is not None:
        raise ConversionError(field, problem)
    return serial


def _choice(path: str, value: object, valid: tuple[str, ...]) -> str | None:
    if value is None or value == "":
        return None
    text = str(value)
    if text not in valid:
        raise ConversionError(path, f"unknown value {text!r}; valid: {', '.join(valid)}")
    return text


def configure(ctx: Context, domain: Domain) -> None:
    """Add every disk with its source, target, driver, alias and boot order."""
    threads = plan(ctx)
    next_auto = 1
    next_dedicated = (threads.auto if threads else 0) + 1
    seen_names: dict[str, int] = {}
    # Boot orders are shared with interfaces (configured before disks).
    boot_orders: dict[int, str] = {
        iface.boot.order: f"interface {iface.alias.name if iface.alias else ''}"
        for iface in domain.devices.interfaces
        if iface.boot is not None
    }
    queues = ctx.topology.vcpus if ctx.devices.block_multi_queue else None
    vmi_disks = ctx.devices.disks or ()
    namer = _DeviceNamer(ctx, vmi_disks)
    for index, vmi_disk in enumerate(vmi_disks):
        path = f"spec.domain.devices.disks[{index}]"
        name = check_component(f"{path}.name", vmi_disk.name)
        if name in seen_names:
            raise ConversionError(
                f"{path}.name",
                f"duplicate disk {name!r} (also disks[{seen_names[name]}]): "
                "each disk needs its own volume and target",
            )
        seen_names[name] = index
        hotplug = name in ctx.hotpluggable_volumes
        target = _target(vmi_disk, path, _HOTPLUG_BUS if hotplug else _DEFAULT_BUS)
        if hotplug:
            _check_hotplug_target(target)
        prefix = _PREFIX[target.bus]
        unit = namer.unit(name, prefix)
        disk = Disk(
            device=target.device,
            type="file",
            target=DiskTarget(bus=target.bus, dev=device_name(prefix, unit), tray=target.tray),
            serial=_serial(f"{path}.serial", vmi_disk.serial),
            driver=DiskDriver(
                cache=_choice(f"{path}.cache", vmi_disk.cache, _CACHES),
                error_policy=_choice(f"{path}.errorPolicy", vmi_disk.error_policy, _ERROR_POLICIES)
                or "stop",
                io=_choice(f"{path}.io", vmi_disk.io, _IO_MODES),
                name="qemu",
                type="raw",
                discard="unmap" if target.device != "cdrom" else None,
            ),
            readonly=target.readonly,
            alias=Alias.of_user_device(name),
        )
        assert disk.driver is not None
        if target.bus == "virtio":
            disk.model = ctx.virtio_model
            disk.driver.queues = queues
        pci = vmi_disk.disk.pci_address if vmi_disk.disk is not None else None
        if pci:
            if target.bus != "virtio":
                raise ConversionError(
                    f"{path}.disk.pciAddress", "a PCI address needs the virtio bus"
                )
            disk.address = ctx.pci_addresses.claim(f"{path}.disk.pciAddress", pci)
        disk.blockio = _block_io(vmi_disk, path)
        if target.bus == "scsi":
            disk.address = Address(type="drive", controller="0", bus="0", unit=str(unit))
        if vmi_disk.shareable:
            if disk.driver.cache not in (None, "none"):
                raise ConversionError(f"{path}.cache", "a shareable disk needs cache: none")
            disk.driver.cache = "none"
            disk.shareable = True
        # A disk that comes and goes while the guest runs is never booted from.
        if vmi_disk.boot_order is not None and not hotplug:
            order = vmi_disk.boot_order
            if order < 1:
                raise ConversionError(f"{path}.bootOrder", "must be 1 or more")
            if order in boot_orders:
                raise ConversionError(
                    f"{path}.bootOrder",
                    f"boot order {order} is already used by {boot_orders[order]}",
                )
            boot_orders[order] = f"disks[{index}]"
            disk.boot = BootOrder(order=order)
        found = ctx.volumes.get(name)
        if found is None:
            if target.device != "cdrom":
                raise ConversionError(
                    f"{path}.name", f"no volume named {name!r} in spec.volumes; add one"
                )
            disk.driver.discard = None  # an empty tray
        else:
            volume_index, volume = found
            _source(ctx, disk, volume, f"spec.volumes[{volume_index}]", target)
        if threads is not None and target.bus == "virtio":
            if threads.supplemental:
                disk.driver.iothreads = DiskIOThreads(
                    iothreads=[DiskIOThread(id=i) for i in range(1, threads.total + 1)]
                )
            elif vmi_disk.dedicated_io_thread:
                disk.driver.iothread = next_dedicated
                next_dedicated += 1
            else:
                disk.driver.iothread = next_auto
                next_auto = next_auto % max(threads.auto, 1) + 1
        if hotplug and name not in ctx.options.hotplug_volumes:
            continue  # not in the pod (yet, or any more): no disk, its target kept free
        domain.devices.disks.append(disk)


class _DeviceNamer:
    """Target names per family (``vd``/``sd``): the ones ``status.volumeStatus`` reports
    are kept, a disk without one takes the lowest free index (upstream's deviceNamer)."""

    def __init__(self, ctx: Context, disks: Sequence[VmiDisk]) -> None:
        status = ctx.vmi.status
        reported = {
            s.name: s.target
            for s in (status.volume_status if status is not None else None) or ()
            if s.target
        }
        self._taken: dict[str, set[int]] = {}
        self._kept: dict[str, int] = {}
        for index, disk in enumerate(disks):
            dev = reported.get(disk.name)
            if dev is None or disk.name in self._kept:
                continue
            hotplug = disk.name in ctx.hotpluggable_volumes
            path = f"spec.domain.devices.disks[{index}]"
            try:
                target = _target(disk, path, _HOTPLUG_BUS if hotplug else _DEFAULT_BUS)
            except ConversionError:
                continue  # refused with its field path when the disk is converted
            prefix = _PREFIX[target.bus]
            found = device_index(prefix, dev)
            taken = self._taken.setdefault(prefix, set())
            if found is None or found in taken:
                continue  # another bus's name now, or claimed twice: named afresh
            taken.add(found)
            self._kept[disk.name] = found

    def unit(self, name: str, prefix: str) -> int:
        """The index of disk ``name``'s target in family ``prefix`` (claimed from now on)."""
        taken = self._taken.setdefault(prefix, set())
        kept = self._kept.get(name)
        if kept is not None:
            return kept
        unit = 0
        while unit in taken:
            unit += 1
        taken.add(unit)
        return unit


def _check_hotplug_target(target: _Target) -> None:
    if target.device != "disk":
        raise ConversionError(
            target.path, f"a hotplugged volume is attached as a disk, not as a {target.device}"
        )
    if target.bus not in _HOTPLUG_BUSES:
        raise ConversionError(
            f"{target.path}.bus",
            f"a hotplugged disk needs a bus that takes disks while the guest runs "
            f"({', '.join(_HOTPLUG_BUSES)}), not {target.bus!r}",
        )


def _block_io(disk: VmiDisk, path: str) -> BlockIO | None:
    """Custom block sizes; matching the volume's needs a probe, which is not done here."""
    size = disk.block_size
    if size is None:
        return None
    if size.custom is not None:
        custom = size.custom
        for name, value in (("logical", custom.logical), ("physical", custom.physical)):
            if value is not None and (value < 512 or value & (value - 1)):
                raise ConversionError(
                    f"{path}.blockSize.custom.{name}",
                    f"{value} must be a power of two of 512 or more",
                )
        return BlockIO(
            logical_block_size=custom.logical,
            physical_block_size=custom.physical,
            discard_granularity=custom.discard_granularity,
        )
    if size.match_volume is not None and size.match_volume.enabled is not False:
        raise ConversionError(
            f"{path}.blockSize.matchVolume",
            "matching the volume's block size is not supported; give blockSize.custom",
        )
    return None


def _source(ctx: Context, disk: Disk, volume: Volume, path: str, target: _Target) -> None:
    """Point ``disk`` at the launcher-side file or device of ``volume``."""
    layout = ctx.layout
    name = volume.name
    driver = disk.driver
    assert driver is not None
    if (
        target.device == "lun"
        and volume.persistent_volume_claim is None
        and volume.data_volume is None
    ):
        raise ConversionError(
            target.path, "a lun needs a block persistentVolumeClaim or dataVolume volume"
        )
    if volume.container_disk is not None:
        image_path = volume.container_disk.path
        if image_path is not None:
            check_image_path(f"{path}.containerDisk.path", image_path)
        if not volume.container_disk.image:
            raise ConversionError(f"{path}.containerDisk.image", "required: the image to boot")
        driver.type = "qcow2"
        disk.source = DiskSource(file=layout.overlay_image(name))
        disk.backing_store = BackingStore(
            type="file",
            format=BackingStoreFormat(type=ctx.options.container_disk_formats.get(name, "qcow2")),
            source=DiskSource(
                file=ctx.options.container_disk_images.get(name)
                or layout.container_disk_image(name, image_path)
            ),
        )
    elif volume.cloud_init_no_cloud is not None or volume.cloud_init_config_drive is not None:
        drive = volume.cloud_init_config_drive is not None
        disk.source = DiskSource(file=layout.cloud_init_iso(ctx.namespace, ctx.name, drive))
    elif volume.host_disk is not None:
        host_path = volume.host_disk.path
        check_image_path(f"{path}.hostDisk.path", host_path)
        disk.source = DiskSource(file=layout.host_disk_image(name, host_path))
    elif name in ctx.hotpluggable_volumes:
        disk.type = "file"
        disk.source = DiskSource(file=layout.hotplug_disk_image(name))
    elif volume.persistent_volume_claim is not None or volume.data_volume is not None:
        _claim(ctx, disk, name)
    elif volume.ephemeral is not None:
        if volume.ephemeral.persistent_volume_claim is None:
            raise ConversionError(
                f"{path}.ephemeral.persistentVolumeClaim", "required: the claim under the overlay"
            )
        base = Disk(device="disk", type="file", driver=DiskDriver(type="raw"))
        _claim(ctx, base, name)
        driver.type = "qcow2"
        disk.source = DiskSource(file=layout.overlay_image(name))
        disk.backing_store = BackingStore(
            type=base.type, format=BackingStoreFormat(type="raw"), source=base.source
        )
    elif volume.empty_disk is not None:
        driver.type = "qcow2"
        disk.source = DiskSource(file=layout.empty_disk_image(name))
    elif volume.config_map is not None:
        disk.source = DiskSource(file=layout.config_volume_iso("configMap", name))
    elif volume.secret is not None:
        disk.source = DiskSource(file=layout.config_volume_iso("secret", name))
    elif volume.downward_api is not None:
        disk.source = DiskSource(file=layout.config_volume_iso("downwardAPI", name))
    elif volume.service_account is not None:
        disk.source = DiskSource(file=layout.config_volume_iso("serviceAccount", name))
    elif volume.sysprep is not None:
        disk.source = DiskSource(file=layout.config_volume_iso("sysprep", name))
    else:
        for attribute, reason in _UNSERVED.items():
            if getattr(volume, attribute) is not None:
                raise ConversionError(path, f"volume {name!r}: {reason}")
        raise ConversionError(
            path,
            f"volume {name!r} has no source this launcher can serve (containerDisk, "
            "persistentVolumeClaim, dataVolume, ephemeral, emptyDisk, hostDisk, "
            "cloudInitNoCloud, cloudInitConfigDrive, configMap, secret, downwardAPI, "
            "serviceAccount, sysprep)",
        )


def _claim(ctx: Context, disk: Disk, name: str) -> None:
    if name in ctx.options.block_volumes:
        disk.type = "block"
        disk.source = DiskSource(dev=ctx.layout.block_volume_device(name), name=name)
    else:
        disk.type = "file"
        disk.source = DiskSource(file=ctx.layout.filesystem_volume_image(name))
