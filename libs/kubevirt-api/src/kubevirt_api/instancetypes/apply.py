"""An instancetype (and preference) applied to a VMI spec, as upstream's ``ApplyToVMI``.

The instancetype provides; whatever it provides the VM must leave unset, else each such
field is a :class:`Conflict` (its path under `field`, e.g. ``spec.template.spec``) and the
preference is not applied. Inputs are never changed: the result holds copies.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from ..quantity import Quantity, QuantityError
from ..values import as_int, as_map
from ._json import JSON, child, clone, items, unset
from .conflicts import Conflict
from .preference import (
    SPREAD_ACROSS_CORES_THREADS,
    SPREAD_ACROSS_SOCKETS_CORES,
    SPREAD_ACROSS_SOCKETS_CORES_THREADS,
    apply_preference,
    preferred_topology,
    spread_options,
)

__all__ = ["Applied", "apply_to_vmi_spec", "check_spread_topology", "guest_topology"]

_THREADS_PER_CORE: Final = 2
# CPU fields the VM may not set alongside an instancetype that sets them too
# (instancetype name, VMI name).
_CPU_FIELDS: Final = (
    ("model", "model"),
    ("dedicatedCPUPlacement", "dedicatedCpuPlacement"),
    ("isolateEmulatorThread", "isolateEmulatorThread"),
    ("numa", "numa"),
    ("realtime", "realtime"),
)


@dataclass(frozen=True, slots=True)
class Applied:
    """The VMI spec and annotations with everything applied, or the conflicts found."""

    spec: JSON
    annotations: JSON
    conflicts: tuple[Conflict, ...]


def _path(base: str, *names: str) -> Conflict:
    return Conflict(".".join((base, *names)) if base else ".".join(names))


def guest_topology(vcpus: int, preference: Mapping[str, Any] | None) -> dict[str, int]:
    """sockets/cores/threads for `vcpus` under the preference's preferred topology."""
    topology = {"sockets": 1, "cores": 1, "threads": 1}
    if vcpus == 1:
        return topology
    preferred = preferred_topology(preference)
    if preferred in ("sockets", "any"):
        topology["sockets"] = vcpus
    elif preferred in ("cores", "threads"):
        topology[preferred] = vcpus
    elif preferred == "spread":
        ratio, across = spread_options(preference)
        if across == SPREAD_ACROSS_SOCKETS_CORES:
            topology.update(cores=ratio, sockets=vcpus // ratio)
        elif across == SPREAD_ACROSS_CORES_THREADS:
            topology.update(threads=ratio, cores=vcpus // ratio)
        elif across == SPREAD_ACROSS_SOCKETS_CORES_THREADS:
            topology.update(
                threads=_THREADS_PER_CORE, cores=ratio, sockets=vcpus // _THREADS_PER_CORE // ratio
            )
    return topology


def check_spread_topology(
    instancetype: Mapping[str, Any] | None, preference: Mapping[str, Any] | None
) -> Conflict | None:
    """Why a spread topology cannot divide the instancetype's vCPUs (None when it can)."""
    if instancetype is None or preferred_topology(preference) != "spread":
        return None
    guest = as_int(as_map(instancetype.get("cpu")).get("guest")) or 0
    ratio, across = spread_options(preference)
    field = "instancetype.spec.cpu.guest"
    by_ratio = "Spec.PreferSpreadSocketToCoreRatio or Spec.CPU.PreferSpreadOptions.Ratio"
    if across == SPREAD_ACROSS_SOCKETS_CORES and ratio and guest % ratio:
        return Conflict(
            field,
            f"{guest} vCPUs provided by the instance type are not divisible by the "
            f"{by_ratio} of {ratio} provided by the preference",
        )
    if across == SPREAD_ACROSS_CORES_THREADS and ratio and guest % ratio:
        return Conflict(
            field,
            f"{guest} vCPUs provided by the instance type are not divisible by the number "
            f"of threads per core {ratio}",
        )
    if (
        across == SPREAD_ACROSS_SOCKETS_CORES_THREADS
        and ratio
        and (guest % _THREADS_PER_CORE or (guest // _THREADS_PER_CORE) % ratio)
    ):
        return Conflict(
            field,
            f"{guest} vCPUs provided by the instance type are not divisible by the number "
            f"of threads per core {_THREADS_PER_CORE} and {by_ratio} of {ratio}",
        )
    return None


def _resources(domain: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    return as_map(as_map(domain.get("resources")).get(kind))


def _cpu(
    base: str, itype: Mapping[str, Any], preference: Mapping[str, Any] | None, spec: JSON
) -> list[Conflict]:
    domain = child(spec, "domain")
    cpu = child(domain, "cpu")
    wanted = as_map(itype.get("cpu"))
    found: list[Conflict] = []
    for kind in ("requests", "limits"):
        if "cpu" in _resources(domain, kind):
            found.append(_path(base, "domain", "resources", kind, "cpu"))
    for name in ("sockets", "cores", "threads"):
        if cpu.get(name):
            found.append(_path(base, "domain", "cpu", name))
    for source, target in _CPU_FIELDS:
        if cpu.get(target) and wanted.get(source) is not None:
            found.append(_path(base, "domain", "cpu", target))
    if found:
        return found
    for source, target in _CPU_FIELDS:
        if wanted.get(source) is not None:
            cpu[target] = clone(wanted[source])
    if wanted.get("maxSockets") is not None:
        cpu["maxSockets"] = wanted["maxSockets"]
    cpu.update(guest_topology(as_int(wanted.get("guest")) or 0, preference))
    return []


def _float32(value: float) -> float:
    # Upstream computes the overcommitted request in float32; the same rounding here.
    result: float = struct.unpack("f", struct.pack("f", value))[0]
    return result


def overcommitted_request(guest: object, percent: int) -> str | int | float:
    """The memory request that leaves `percent` of the guest's memory overcommitted."""
    quantity = Quantity.parse(guest)
    factor = _float32(1 - _float32(_float32(percent) / 100))
    request = int(_float32(_float32(float(quantity.to_int())) * factor))
    binary = isinstance(quantity.original, str) and quantity.original.endswith("i")
    return Quantity.from_value(request, binary=binary).to_json()


def _memory(base: str, itype: Mapping[str, Any], spec: JSON) -> list[Conflict]:
    domain = child(spec, "domain")
    memory = child(domain, "memory")
    wanted = as_map(itype.get("memory"))
    if not unset(memory, "guest"):
        return [_path(base, "domain", "memory", "guest")]
    for name in ("hugepages", "maxGuest"):
        if not unset(memory, name) and wanted.get(name) is not None:
            return [_path(base, "domain", "memory", name)]
    for kind in ("requests", "limits"):
        if "memory" in _resources(domain, kind):
            return [_path(base, "domain", "resources", kind, "memory")]
    if wanted.get("guest") is not None:
        memory["guest"] = clone(wanted["guest"])
        percent = as_int(wanted.get("overcommitPercent")) or 0
        if percent > 0:
            try:
                request = overcommitted_request(wanted["guest"], percent)
            except QuantityError:
                request = None
            if request is not None:
                child(child(domain, "resources"), "requests")["memory"] = request
    for name in ("hugepages", "maxGuest"):
        if wanted.get(name) is not None:
            memory[name] = clone(wanted[name])
    return []


def _io_threads(base: str, itype: Mapping[str, Any], spec: JSON) -> list[Conflict]:
    domain = child(spec, "domain")
    found: list[Conflict] = []
    count = as_map(itype.get("ioThreads")).get("supplementalPoolThreadCount")
    if count is not None:
        if as_map(domain.get("ioThreads")).get("supplementalPoolThreadCount") is not None:
            found.append(_path(base, "domain", "ioThreads", "supplementalPoolThreadCount"))
        else:
            child(domain, "ioThreads")["supplementalPoolThreadCount"] = count
    if itype.get("ioThreadsPolicy") is not None:
        if not unset(domain, "ioThreadsPolicy"):
            found.append(_path(base, "domain", "ioThreadsPolicy"))
        else:
            domain["ioThreadsPolicy"] = itype["ioThreadsPolicy"]
    return found


def _devices(base: str, itype: Mapping[str, Any], spec: JSON) -> list[Conflict]:
    found: list[Conflict] = []
    domain = child(spec, "domain")
    if itype.get("launchSecurity") is not None:
        if not unset(domain, "launchSecurity"):
            found.append(_path(base, "domain", "launchSecurity"))
        else:
            domain["launchSecurity"] = clone(itype["launchSecurity"])
    for name in ("gpus", "hostDevices"):
        provided = items(itype, name)
        if not provided:
            continue
        devices = child(domain, "devices")
        if items(devices, name):
            found.append(_path(base, "domain", "devices", name))
        else:
            devices[name] = clone(provided)
    return found


def _scheduling(base: str, itype: Mapping[str, Any], spec: JSON) -> list[Conflict]:
    found: list[Conflict] = []
    if itype.get("nodeSelector") is not None:
        if not unset(spec, "nodeSelector"):
            found.append(_path(base, "nodeSelector"))
        else:
            spec["nodeSelector"] = clone(itype["nodeSelector"])
    if itype.get("schedulerName"):
        if spec.get("schedulerName"):
            found.append(_path(base, "schedulerName"))
        else:
            spec["schedulerName"] = itype["schedulerName"]
    return found


def _annotations(itype: Mapping[str, Any], annotations: JSON) -> list[Conflict]:
    found: list[Conflict] = []
    for key, value in as_map(itype.get("annotations")).items():
        if key in annotations:
            if annotations[key] != value:
                # Upstream names these without the base path.
                found.append(Conflict(f"annotations.{key}"))
            continue
        annotations[key] = value
    return found


def apply_to_vmi_spec(
    field: str,
    instancetype: Mapping[str, Any] | None,
    preference: Mapping[str, Any] | None,
    spec: Mapping[str, Any],
    annotations: Mapping[str, Any] | None = None,
) -> Applied:
    """Apply an instancetype spec and a preference spec to a VMI spec and its annotations.

    `field` is where `spec` sits in the object being admitted or built (``spec`` for a
    VMI, ``spec.template.spec`` for a VM); conflict paths start there.
    """
    out: JSON = clone(dict(spec))
    notes: JSON = clone(dict(annotations or {}))
    if instancetype is not None:
        itype = as_map(instancetype)
        conflicts = [
            *_scheduling(field, itype, out),
            *_cpu(field, itype, preference, out),
            *_memory(field, itype, out),
            *_io_threads(field, itype, out),
            *_devices(field, itype, out),
            *_annotations(itype, notes),
        ]
        if conflicts:
            return Applied(out, notes, tuple(conflicts))
    apply_preference(preference, out, notes)
    return Applied(out, notes, ())
