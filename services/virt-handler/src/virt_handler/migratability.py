"""Whether a VMI can live-migrate, and how: upstream's `calculateLiveMigrationCondition`. Pure.

The `LiveMigratable` condition is False with the first reason that forbids a migration
(interfaces, host devices, confidential computing, Hyper-V passthrough, then disks, in
upstream's order), True otherwise. `status.migrationMethod` is `BlockMigration` when a
local disk must be copied along (containerDisk, cloud-init, emptyDisk, ephemeral...),
`LiveMigration` when every disk is shared or read-only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ALLOW_POD_BRIDGE_MIGRATION",
    "BLOCK_MIGRATION",
    "DISKS_NOT_MIGRATABLE",
    "HOST_DEVICE_NOT_MIGRATABLE",
    "INTERFACE_NOT_MIGRATABLE",
    "LIVE_MIGRATION",
    "Migratability",
    "interface_not_migratable",
    "migratability",
]

ALLOW_POD_BRIDGE_MIGRATION = "kubevirt.io/allow-pod-bridge-network-live-migration"
INTERFACE_NOT_MIGRATABLE = "InterfaceNotLiveMigratable"
DISKS_NOT_MIGRATABLE = "DisksNotLiveMigratable"
HOST_DEVICE_NOT_MIGRATABLE = "HostDeviceNotLiveMigratable"
_SEV = "SEVNotLiveMigratable"
_TDX = "TDXNotLiveMigratable"
_HYPERV_PASSTHROUGH = "HypervPassthroughNotLiveMigratable"
#: status.migrationMethod values.
BLOCK_MIGRATION = "BlockMigration"
LIVE_MIGRATION = "LiveMigration"
_SHARED_ACCESS = "ReadWriteMany"


@dataclass(frozen=True)
class Migratability:
    """The LiveMigratable verdict: `reason` "" means migratable."""

    block_migration: bool
    reason: str = ""
    message: str = ""

    @property
    def method(self) -> str:
        """status.migrationMethod."""
        return BLOCK_MIGRATION if self.block_migration else LIVE_MIGRATION


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: object) -> Sequence[Any]:
    return value if isinstance(value, list | tuple) else ()


def interface_not_migratable(vmi: Mapping[str, Any]) -> str:
    """Upstream's `checkNetworkInterfacesForMigration` for the pod network: why the
    VMI's primary interface cannot live-migrate ("" when it can). Bridge binding on the
    pod network cannot, unless the VMI carries ALLOW_POD_BRIDGE_MIGRATION."""
    spec = _map(vmi.get("spec"))
    pod_network = next((_map(n) for n in _list(spec.get("networks")) if "pod" in _map(n)), None)
    devices = _map(_map(spec.get("domain")).get("devices"))
    interfaces = [_map(i) for i in _list(devices.get("interfaces"))]
    if pod_network is None or not interfaces:
        return ""
    primary = next((i for i in interfaces if i.get("name") == pod_network.get("name")), None)
    if primary is None:
        return f"no primary interface found for network {pod_network.get('name')}"
    if "masquerade" in primary or "passtBinding" in primary:
        return ""
    annotations = _map(_map(vmi.get("metadata")).get("annotations"))
    if "bridge" in primary and ALLOW_POD_BRIDGE_MIGRATION in annotations:
        return ""
    return (
        "cannot migrate VMI which does not use masquerade or a migratable plugin to connect "
        "to the pod network"
    )


def _read_only_volumes(devices: Mapping[str, Any]) -> set[str]:
    # A CD-ROM is read-only unless it says otherwise: nothing to copy.
    out = set()
    for disk in map(_map, _list(devices.get("disks"))):
        cdrom = disk.get("cdrom")
        if isinstance(cdrom, Mapping) and cdrom.get("readonly", True) is not False:
            out.add(str(disk.get("name")))
    return out


def _volumes(vmi: Mapping[str, Any]) -> tuple[bool, str]:
    """Upstream's `checkVolumesForMigration`: (block migration, why not migratable)."""
    spec = _map(vmi.get("spec"))
    status = _map(vmi.get("status"))
    devices = _map(_map(spec.get("domain")).get("devices"))
    claims = {
        str(_map(s).get("name")): _map(_map(s).get("persistentVolumeClaimInfo"))
        for s in _list(status.get("volumeStatus"))
    }
    filesystems = {str(_map(f).get("name")) for f in _list(devices.get("filesystems"))}
    read_only = _read_only_volumes(devices)
    block = bool(_list(status.get("migratedVolumes")))
    for volume in map(_map, _list(spec.get("volumes"))):
        name = str(volume.get("name"))
        pvc, data_volume = _map(volume.get("persistentVolumeClaim")), volume.get("dataVolume")
        host_disk = volume.get("hostDisk")
        if pvc or isinstance(data_volume, Mapping):
            claim = str(pvc.get("claimName") or _map(data_volume).get("name"))
            info = claims.get(name)
            if not info:
                return True, (
                    f"cannot migrate VMI: Unable to determine if PVC {claim} is shared, live "
                    "migration requires that all PVCs must be shared (using ReadWriteMany "
                    "access mode)"
                )
            if _SHARED_ACCESS not in _list(info.get("accessModes")):
                return True, (
                    f"cannot migrate VMI: PVC {claim} is not shared, live migration requires "
                    "that all PVCs must be shared (using ReadWriteMany access mode)"
                )
        elif isinstance(host_disk, Mapping):
            if host_disk.get("shared") is not True:
                return True, "cannot migrate VMI with non-shared HostDisk"
        elif name not in filesystems and name not in read_only:
            block = True
    return block, ""


def migratability(vmi: Mapping[str, Any]) -> Migratability:
    """The LiveMigratable verdict and migration method of `vmi` (raw JSON)."""
    block, disks = _volumes(vmi)
    domain = _map(_map(vmi.get("spec")).get("domain"))
    devices = _map(domain.get("devices"))
    launch_security = _map(domain.get("launchSecurity"))
    passthrough = _map(_map(domain.get("features")).get("hypervPassthrough"))
    gpus = _list(devices.get("gpus"))
    checks = (
        (INTERFACE_NOT_MIGRATABLE, interface_not_migratable(vmi)),
        (
            HOST_DEVICE_NOT_MIGRATABLE,
            "VMI specifies non-migratable generic PCI host device"
            if _list(devices.get("hostDevices"))
            else "VMI specifies too many GPUs"
            if len(gpus) > 1
            else "VMI specifies non-migratable GPU device"
            if gpus
            else "",
        ),
        (_SEV, "VMI uses SEV" if "sev" in launch_security else ""),
        (_TDX, "VMI uses TDX" if "tdx" in launch_security else ""),
        (
            _HYPERV_PASSTHROUGH,
            "VMI uses hyperv passthrough" if passthrough.get("enabled") is True else "",
        ),
        (DISKS_NOT_MIGRATABLE, disks),
    )
    for reason, message in checks:
        if message:
            return Migratability(block, reason, message)
    return Migratability(block)
