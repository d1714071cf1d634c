"""The defaults the mutating webhooks apply, as functions from an object to its defaulted copy.

`Defaulter` is the seam: virt-api's app takes one per kind. The stand-ins here cover the
defaults upstream's webhooks set on their own (VM run strategy, VMI machine/CPU/network/
disks); kubevirt_api's shared defaulting replaces `default_vmi` once it lands.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["Defaulter", "default_migration", "default_vm", "default_vmi", "default_vmi_spec"]

Defaulter = Callable[[Mapping[str, Any]], dict[str, Any]]


def _obj(parent: dict[str, Any], key: str) -> dict[str, Any]:
    value = parent.get(key)
    if not isinstance(value, dict):
        value = {}
        parent[key] = value
    return value


def default_vmi_spec(spec: dict[str, Any]) -> None:
    """Fill a VMI spec in place with upstream's defaults (tolerating odd shapes)."""
    domain = _obj(spec, "domain")
    machine = _obj(domain, "machine")
    machine.setdefault("type", "q35")
    cpu = _obj(domain, "cpu")
    for key in ("cores", "sockets", "threads"):
        cpu.setdefault(key, 1)
    devices = _obj(domain, "devices")
    networks = spec.get("networks")
    interfaces = devices.get("interfaces")
    if devices.get("autoattachPodInterface") is not False and not networks and not interfaces:
        spec["networks"] = [{"name": "default", "pod": {}}]
        devices["interfaces"] = [{"name": "default", "masquerade": {}}]
    disks = devices.get("disks")
    if not isinstance(disks, list):
        disks = []
    names = {d.get("name") for d in disks if isinstance(d, dict)}
    filesystems = devices.get("filesystems")
    if isinstance(filesystems, list):
        names |= {f.get("name") for f in filesystems if isinstance(f, dict)}
    volumes = spec.get("volumes")
    for volume in volumes if isinstance(volumes, list) else []:
        if (
            isinstance(volume, dict)
            and isinstance(volume.get("name"), str)
            and volume["name"] not in names
        ) and "memoryDump" not in volume:
            disks.append({"name": volume["name"]})
    for disk in disks:
        if not isinstance(disk, dict):
            continue
        if not any(t in disk for t in ("disk", "lun", "cdrom")):
            disk["disk"] = {}
        for target, bus in (("disk", "virtio"), ("lun", "scsi"), ("cdrom", "sata")):
            if isinstance(disk.get(target), dict):
                disk[target].setdefault("bus", bus)
    if disks:
        devices["disks"] = disks
    resources = _obj(domain, "resources")
    requests = resources.get("requests")
    guest = (
        domain.get("memory", {}).get("guest") if isinstance(domain.get("memory"), dict) else None
    )
    if guest is not None and (not isinstance(requests, dict) or "memory" not in requests):
        _obj(resources, "requests")["memory"] = guest


def default_vmi(vmi: Mapping[str, Any]) -> dict[str, Any]:
    """A defaulted copy of a VMI."""
    out = copy.deepcopy(dict(vmi))
    default_vmi_spec(_obj(out, "spec"))
    return out


def default_vm(vm: Mapping[str, Any]) -> dict[str, Any]:
    """A defaulted copy of a VM: run strategy Halted when unset, template machine type."""
    out = copy.deepcopy(dict(vm))
    spec = _obj(out, "spec")
    if "running" not in spec and "runStrategy" not in spec:
        spec["runStrategy"] = "Halted"
    template = spec.get("template")
    if isinstance(template, dict):
        tspec = _obj(template, "spec")
        domain = _obj(tspec, "domain")
        _obj(domain, "machine").setdefault("type", "q35")
    return out


def default_migration(migration: Mapping[str, Any]) -> dict[str, Any]:
    """A migration carries its VMI's name as a label, so it can be found by selector."""
    out = copy.deepcopy(dict(migration))
    spec = out.get("spec")
    name = spec.get("vmiName") if isinstance(spec, dict) else None
    if isinstance(name, str) and name:
        labels = _obj(_obj(out, "metadata"), "labels")
        labels.setdefault("kubevirt.io/vmi-name", name)
    return out
