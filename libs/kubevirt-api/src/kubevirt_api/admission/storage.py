"""VMI storage rules: disks and volumes, containerDisk, hostDisk, cloud-init."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

from ..clusterconfig import ClusterConfig
from ..diskserial import disk_serial_problem
from ..paths import image_path_problem
from ..values import as_int, as_list, as_map, as_str
from .causes import Cause, CauseType, FieldPath
from .quantity import parse_quantity

__all__ = [
    "DATA_VOLUME_UNSUPPORTED",
    "boot_orders",
    "check_boot_orders",
    "check_disk_details",
    "check_disks",
    "check_volumes",
    "check_volumes_have_disks",
    "validate_path",
]

MAX_DISKS = 256
CLOUD_INIT_MAX_LEN = 2048
DISK_TARGETS = ("disk", "lun", "cdrom")
# Buses each disk target may use (upstream refuses virtio for CD-ROMs, and IDE altogether).
VALID_BUSES = {
    "disk": ("virtio", "sata", "scsi", "usb"),
    "lun": ("virtio", "sata", "scsi"),
    "cdrom": ("sata", "scsi"),
}
VOLUME_SOURCES = (
    "cloudInitConfigDrive",
    "cloudInitNoCloud",
    "configMap",
    "containerDisk",
    "dataVolume",
    "downwardAPI",
    "downwardMetrics",
    "emptyDisk",
    "ephemeral",
    "hostDisk",
    "memoryDump",
    "persistentVolumeClaim",
    "secret",
    "serviceAccount",
    "sysprep",
)
HOST_DISK_TYPES = ("Disk", "DiskOrCreate")


def validate_path(path: object, field: FieldPath, what: str) -> list[Cause]:
    """A path inside an image (or on the host) must pass kubevirt_api's one path rule."""
    text = as_str(path) or ""
    problem = image_path_problem(text)
    if problem is None:
        return []
    return [Cause(str(field), f"{what} '{text}' {problem}" if text else f"{what} {problem}")]


def check_disks(spec: Mapping[str, Any], path: FieldPath) -> list[Cause]:
    """Disk names unique and backed by a volume; one target type; a valid bus each."""
    causes: list[Cause] = []
    disks_path = path.child("domain", "devices", "disks")
    disks = as_list(as_map(as_map(spec.get("domain")).get("devices")).get("disks"))
    if len(disks) > MAX_DISKS:
        causes.append(
            Cause(str(disks_path), f"at most {MAX_DISKS} disks are allowed, got {len(disks)}")
        )
    volume_names = {as_str(as_map(v).get("name")) for v in as_list(spec.get("volumes"))}
    seen: dict[str, int] = {}
    for i, raw in enumerate(disks):
        disk = as_map(raw)
        dpath = disks_path.index(i)
        name = as_str(disk.get("name"))
        if not name:
            causes.append(
                Cause(str(dpath.child("name")), "a disk needs a name", CauseType.REQUIRED)
            )
        else:
            if name in seen:
                causes.append(
                    Cause(
                        str(dpath.child("name")),
                        f"disk name '{name}' is already used by {disks_path.index(seen[name])}; "
                        "disk names must be unique",
                        CauseType.DUPLICATE,
                    )
                )
            else:
                seen[name] = i
            if name not in volume_names:
                causes.append(
                    Cause(
                        str(dpath.child("name")),
                        f"disk '{name}' has no volume of that name in {path.child('volumes')}; "
                        "add a volume with the same name",
                    )
                )
        targets = [t for t in DISK_TARGETS if t in disk]
        if len(targets) > 1:
            causes.append(
                Cause(
                    str(dpath),
                    f"a disk may set only one of disk, lun or cdrom, found {', '.join(targets)}",
                )
            )
        for target in targets:
            bus = as_str(as_map(disk.get(target)).get("bus"))
            valid = VALID_BUSES[target]
            if bus is not None and bus not in valid:
                causes.append(
                    Cause(
                        str(dpath.child(target, "bus")),
                        f"bus '{bus}' is not valid for a {target}; use one of {', '.join(valid)}",
                        CauseType.NOT_SUPPORTED,
                    )
                )
        causes.extend(check_disk_details(disk, dpath))
    return causes


def check_disk_details(disk: Mapping[str, Any], dpath: FieldPath) -> list[Cause]:
    """A disk's cache, io, errorPolicy and serial, each one of the values upstream allows."""
    causes: list[Cause] = []
    cache = as_str(disk.get("cache"))
    if cache is not None and cache not in ("none", "writethrough", "writeback"):
        causes.append(
            Cause(
                str(dpath.child("cache")),
                f"cache '{cache}' is not supported; use none, writethrough or writeback",
                CauseType.NOT_SUPPORTED,
            )
        )
    io = as_str(disk.get("io"))
    if io is not None and io not in ("native", "threads"):
        causes.append(
            Cause(
                str(dpath.child("io")),
                f"io '{io}' is not supported; use native or threads",
                CauseType.NOT_SUPPORTED,
            )
        )
    policy = as_str(disk.get("errorPolicy"))
    if policy is not None and policy not in ("stop", "ignore", "report", "enospace"):
        causes.append(
            Cause(
                str(dpath.child("errorPolicy")),
                f"errorPolicy '{policy}' is not supported; use stop, ignore, report or enospace",
                CauseType.NOT_SUPPORTED,
            )
        )
    serial = as_str(disk.get("serial"))
    problem = disk_serial_problem(serial) if serial else None
    if problem is not None:
        causes.append(Cause(str(dpath.child("serial")), problem))
    return causes


#: Why dataVolume volumes and dataVolumeTemplates are refused: their controller is CDI's.
DATA_VOLUME_UNSUPPORTED = (
    "DataVolumes need CDI (the Containerized Data Importer), which is not installed with "
    "kubevirt-py: there is no DataVolume CRD (datavolumes.cdi.kubevirt.io); use a "
    "persistentVolumeClaim volume with a claim you create"
)


def check_volumes(spec: Mapping[str, Any], path: FieldPath, config: ClusterConfig) -> list[Cause]:
    """Volume names unique, exactly one source each, and each source's own rules."""
    causes: list[Cause] = []
    vpath = path.child("volumes")
    seen: dict[str, int] = {}
    for i, raw in enumerate(as_list(spec.get("volumes"))):
        volume = as_map(raw)
        ipath = vpath.index(i)
        name = as_str(volume.get("name"))
        if not name:
            causes.append(
                Cause(str(ipath.child("name")), "a volume needs a name", CauseType.REQUIRED)
            )
        elif name in seen:
            causes.append(
                Cause(
                    str(ipath.child("name")),
                    f"volume name '{name}' is already used by {vpath.index(seen[name])}; "
                    "volume names must be unique",
                    CauseType.DUPLICATE,
                )
            )
        else:
            seen[name] = i
        sources = [s for s in VOLUME_SOURCES if s in volume]
        if len(sources) != 1:
            found = ", ".join(sources) if sources else "none"
            causes.append(
                Cause(
                    str(ipath),
                    "a volume needs exactly one source (for example containerDisk, "
                    f"persistentVolumeClaim, cloudInitNoCloud); found {found}",
                )
            )
        for source in sources:
            body = as_map(volume.get(source))
            spath = ipath.child(source)
            if source == "containerDisk":
                causes.extend(_check_container_disk(body, spath))
            elif source == "hostDisk":
                causes.extend(_check_host_disk(body, spath, config))
            elif source in ("cloudInitNoCloud", "cloudInitConfigDrive"):
                causes.extend(_check_cloud_init(body, spath))
            elif source == "downwardMetrics" and not config.gate("DownwardMetrics"):
                causes.append(_gate_cause(spath, "DownwardMetrics"))
            elif source == "emptyDisk":
                capacity = parse_quantity(body.get("capacity"))
                if capacity is None or capacity <= 0:
                    causes.append(
                        Cause(
                            str(spath.child("capacity")),
                            "emptyDisk needs a positive capacity such as 2Gi",
                            CauseType.REQUIRED,
                        )
                    )
            elif source == "persistentVolumeClaim" and not as_str(body.get("claimName")):
                causes.append(
                    Cause(
                        str(spath.child("claimName")), "claimName is required", CauseType.REQUIRED
                    )
                )
            elif source == "dataVolume":
                causes.append(Cause(str(spath), DATA_VOLUME_UNSUPPORTED))
    return causes


def check_volumes_have_disks(spec: Mapping[str, Any], path: FieldPath) -> list[Cause]:
    """At VMI creation every volume must be used by a disk or a filesystem."""
    devices = as_map(as_map(spec.get("domain")).get("devices"))
    used = {as_str(as_map(d).get("name")) for d in as_list(devices.get("disks"))}
    used |= {as_str(as_map(f).get("name")) for f in as_list(devices.get("filesystems"))}
    causes: list[Cause] = []
    for i, raw in enumerate(as_list(spec.get("volumes"))):
        volume = as_map(raw)
        name = as_str(volume.get("name"))
        if name and name not in used and "memoryDump" not in volume:
            field = path.child("volumes").index(i).child("name")
            causes.append(
                Cause(
                    str(field),
                    f"volume '{name}' is not used by any disk or filesystem; add a disk in "
                    f"{path.child('domain', 'devices', 'disks')} named '{name}'",
                )
            )
    return causes


def _gate_cause(field: FieldPath, gate: str) -> Cause:
    return Cause(
        str(field),
        f"this feature needs the {gate} feature gate; enable it in the KubeVirt CR "
        "spec.configuration.developerConfiguration.featureGates",
        CauseType.FORBIDDEN,
    )


def _check_container_disk(body: Mapping[str, Any], spath: FieldPath) -> list[Cause]:
    causes: list[Cause] = []
    if not as_str(body.get("image")):
        causes.append(
            Cause(str(spath.child("image")), "containerDisk needs an image", CauseType.REQUIRED)
        )
    if "path" in body:
        causes.extend(validate_path(body.get("path"), spath.child("path"), "path"))
    policy = as_str(body.get("imagePullPolicy"))
    if policy is not None and policy not in ("Always", "IfNotPresent", "Never"):
        causes.append(
            Cause(
                str(spath.child("imagePullPolicy")),
                f"imagePullPolicy '{policy}' is not supported; use Always, IfNotPresent or Never",
                CauseType.NOT_SUPPORTED,
            )
        )
    return causes


def _check_host_disk(
    body: Mapping[str, Any], spath: FieldPath, config: ClusterConfig
) -> list[Cause]:
    causes: list[Cause] = []
    if not config.gate("HostDisk"):
        causes.append(_gate_cause(spath, "HostDisk"))
    causes.extend(validate_path(body.get("path"), spath.child("path"), "hostDisk path"))
    kind = as_str(body.get("type"))
    if kind not in HOST_DISK_TYPES:
        causes.append(
            Cause(
                str(spath.child("type")),
                f"hostDisk type '{kind or ''}' is not supported; use Disk or DiskOrCreate",
                CauseType.NOT_SUPPORTED,
            )
        )
    capacity = body.get("capacity")
    if kind == "DiskOrCreate":
        size = parse_quantity(capacity)
        if size is None or size <= 0:
            causes.append(
                Cause(
                    str(spath.child("capacity")),
                    "hostDisk of type DiskOrCreate needs a positive capacity such as 1Gi",
                    CauseType.REQUIRED,
                )
            )
    elif kind == "Disk" and capacity is not None:
        causes.append(
            Cause(
                str(spath.child("capacity")),
                "capacity is only allowed with hostDisk type DiskOrCreate",
                CauseType.FORBIDDEN,
            )
        )
    return causes


def _check_cloud_init(body: Mapping[str, Any], spath: FieldPath) -> list[Cause]:
    causes: list[Cause] = []
    user = [k for k in ("userData", "userDataBase64", "secretRef") if k in body]
    network = [k for k in ("networkData", "networkDataBase64", "networkDataSecretRef") if k in body]
    if len(user) > 1:
        causes.append(
            Cause(
                str(spath),
                f"only one user-data source is allowed (userData, userDataBase64 or secretRef); found {', '.join(user)}",
            )
        )
    if len(network) > 1:
        causes.append(
            Cause(
                str(spath),
                "only one network-data source is allowed (networkData, networkDataBase64 or "
                f"networkDataSecretRef); found {', '.join(network)}",
            )
        )
    if not user and not network:
        causes.append(
            Cause(
                str(spath),
                "set one user-data source (userData, userDataBase64 or secretRef) or one "
                "network-data source",
                CauseType.REQUIRED,
            )
        )
    for key, b64 in (("userData", "userDataBase64"), ("networkData", "networkDataBase64")):
        text = as_str(body.get(key))
        if text is not None and len(text.encode()) > CLOUD_INIT_MAX_LEN:
            causes.append(
                Cause(
                    str(spath.child(key)),
                    f"{key} is {len(text.encode())} bytes; inline data is limited to "
                    f"{CLOUD_INIT_MAX_LEN} bytes, use a secret reference for more",
                )
            )
        encoded = as_str(body.get(b64))
        if encoded is not None:
            try:
                decoded = base64.b64decode(encoded, validate=True)
            except (binascii.Error, ValueError):
                causes.append(Cause(str(spath.child(b64)), f"{b64} is not valid base64"))
            else:
                if len(decoded) > CLOUD_INIT_MAX_LEN:
                    causes.append(
                        Cause(
                            str(spath.child(b64)),
                            f"{b64} decodes to {len(decoded)} bytes; inline data is limited to "
                            f"{CLOUD_INIT_MAX_LEN} bytes, use a secret reference for more",
                        )
                    )
    for ref in ("secretRef", "networkDataSecretRef"):
        if ref in body and not as_str(as_map(body.get(ref)).get("name")):
            causes.append(
                Cause(
                    str(spath.child(ref, "name")), "the secret name is required", CauseType.REQUIRED
                )
            )
    return causes


def boot_orders(spec: Mapping[str, Any], path: FieldPath) -> list[tuple[FieldPath, object]]:
    """Every (field, bootOrder) pair set on disks and interfaces, in spec order."""
    devices = as_map(as_map(spec.get("domain")).get("devices"))
    found: list[tuple[FieldPath, object]] = []
    for group in ("disks", "interfaces"):
        for i, raw in enumerate(as_list(devices.get(group))):
            item = as_map(raw)
            if "bootOrder" in item:
                found.append(
                    (
                        path.child("domain", "devices", group).index(i).child("bootOrder"),
                        item["bootOrder"],
                    )
                )
    return found


def check_boot_orders(spec: Mapping[str, Any], path: FieldPath) -> list[Cause]:
    """Boot orders are positive integers, unique across disks and interfaces."""
    causes: list[Cause] = []
    owner: dict[int, FieldPath] = {}
    for field, value in boot_orders(spec, path):
        order = as_int(value)
        if order is None or order < 1:
            causes.append(Cause(str(field), "bootOrder must be an integer greater than 0"))
        elif order in owner:
            causes.append(
                Cause(
                    str(field),
                    f"bootOrder {order} is already used by {owner[order]}; boot orders must be unique",
                    CauseType.DUPLICATE,
                )
            )
        else:
            owner[order] = field
    return causes
