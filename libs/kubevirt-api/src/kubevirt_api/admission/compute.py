"""VMI compute rules: memory, hugepages, CPU topology and placement, firmware, machine."""

from __future__ import annotations

import re
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from ..clusterconfig import ClusterConfig
from ..values import as_bool, as_int, as_list, as_map, as_str
from .causes import Cause, CauseType, FieldPath
from .quantity import parse_quantity
from .storage import validate_path

__all__ = [
    "HUGEPAGE_SIZES",
    "ONE_MEGABYTE",
    "check_compute",
    "check_memory_requested",
]

ONE_MEGABYTE = Fraction(10**6)
HUGEPAGE_SIZES = {"2Mi": 2**21, "1Gi": 2**30}
ARCHITECTURES = ("amd64", "arm64", "s390x")
CPU_FEATURE_POLICIES = ("force", "require", "optional", "disable", "forbid")
# Machine types per architecture (upstream's default emulatedMachines patterns).
_MACHINES = {
    "amd64": re.compile(r"^(q35|pc-q35.*)$"),
    "arm64": re.compile(r"^virt.*$"),
    "s390x": re.compile(r"^s390-ccw-virtio.*$"),
}


def _quantity(value: object, field: FieldPath, causes: list[Cause]) -> Fraction | None:
    """Parse a quantity field, adding a cause when it is present but malformed or negative."""
    if value is None:
        return None
    parsed = parse_quantity(value)
    if parsed is None:
        causes.append(Cause(str(field), f"'{value}' is not a quantity such as 1Gi, 512Mi or 2"))
        return None
    if parsed < 0:
        causes.append(Cause(str(field), f"'{value}' must be greater than or equal to 0"))
        return None
    return parsed


def check_memory_requested(spec: Mapping[str, Any], path: FieldPath) -> list[Cause]:
    """A VMI must ask for memory somewhere (a VM may get it from an instancetype instead)."""
    domain = as_map(spec.get("domain"))
    resources = as_map(domain.get("resources"))
    memory = as_map(domain.get("memory"))
    if (
        "guest" in memory
        or "memory" in as_map(resources.get("requests"))
        or "memory" in as_map(resources.get("limits"))
        or "size" in as_map(memory.get("hugepages"))
    ):
        return []
    return [
        Cause(
            str(path.child("domain", "resources", "requests", "memory")),
            "no memory requested; set one of spec.domain.resources.requests.memory, "
            "spec.domain.memory.guest or spec.domain.memory.hugepages.size",
            CauseType.REQUIRED,
        )
    ]


def check_compute(spec: Mapping[str, Any], path: FieldPath, config: ClusterConfig) -> list[Cause]:
    """Every compute rule over one VMI spec; all problems are reported together."""
    causes: list[Cause] = []
    dpath = path.child("domain")
    domain = as_map(spec.get("domain"))
    _check_memory(domain, dpath, causes)
    _check_cpu(domain, dpath, config, causes)
    _check_firmware(domain, dpath, causes)
    _check_machine(spec, path, causes)
    return causes


def _check_memory(domain: Mapping[str, Any], dpath: FieldPath, causes: list[Cause]) -> None:
    rpath = dpath.child("resources")
    resources = as_map(domain.get("resources"))
    requests = as_map(resources.get("requests"))
    limits = as_map(resources.get("limits"))
    req_path = rpath.child("requests", "memory")
    lim_path = rpath.child("limits", "memory")
    request = _quantity(requests.get("memory"), req_path, causes)
    limit = _quantity(limits.get("memory"), lim_path, causes)
    for value, field, raw in (
        (request, req_path, requests.get("memory")),
        (limit, lim_path, limits.get("memory")),
    ):
        if value is not None and value < ONE_MEGABYTE:
            causes.append(Cause(str(field), f"'{raw}' is too small; memory must be at least 1M"))
    if request is not None and limit is not None and request > limit:
        causes.append(
            Cause(
                str(req_path),
                f"memory request '{requests.get('memory')}' exceeds the limit "
                f"'{limits.get('memory')}' in {lim_path}; the request must be at most the limit",
            )
        )
    mpath = dpath.child("memory")
    memory = as_map(domain.get("memory"))
    guest = _quantity(memory.get("guest"), mpath.child("guest"), causes)
    if guest is not None and guest < ONE_MEGABYTE:
        causes.append(Cause(str(mpath.child("guest")), "guest memory must be at least 1M"))
    if guest is not None and limit is not None and guest > limit:
        causes.append(
            Cause(
                str(mpath.child("guest")),
                f"guest memory '{memory.get('guest')}' exceeds the memory limit "
                f"'{limits.get('memory')}' in {lim_path}; it must be at most the limit",
            )
        )
    hugepages = as_map(memory.get("hugepages"))
    if "hugepages" in memory:
        hpath = mpath.child("hugepages", "size")
        size_raw = as_str(hugepages.get("size"))
        page = HUGEPAGE_SIZES.get(size_raw or "")
        if page is None:
            causes.append(
                Cause(
                    str(hpath),
                    f"hugepage size '{size_raw or ''}' is not supported; use one of {', '.join(HUGEPAGE_SIZES)}",
                    CauseType.NOT_SUPPORTED,
                )
            )
        else:
            amount = guest if guest is not None else request
            amount_path = mpath.child("guest") if guest is not None else req_path
            if amount is not None:
                if amount < page:
                    causes.append(
                        Cause(
                            str(hpath),
                            f"hugepage size {size_raw} is larger than the memory in {amount_path}; "
                            "use a smaller page or more memory",
                        )
                    )
                elif amount % page:
                    causes.append(
                        Cause(
                            str(amount_path),
                            f"memory is not a multiple of the hugepage size {size_raw}; round it "
                            f"to a multiple of {size_raw}",
                        )
                    )


def _check_cpu(
    domain: Mapping[str, Any], dpath: FieldPath, config: ClusterConfig, causes: list[Cause]
) -> None:
    rpath = dpath.child("resources")
    resources = as_map(domain.get("resources"))
    req_raw = as_map(resources.get("requests")).get("cpu")
    lim_raw = as_map(resources.get("limits")).get("cpu")
    request = _quantity(req_raw, rpath.child("requests", "cpu"), causes)
    limit = _quantity(lim_raw, rpath.child("limits", "cpu"), causes)
    if request is not None and limit is not None and request > limit:
        causes.append(
            Cause(
                str(rpath.child("requests", "cpu")),
                f"CPU request '{req_raw}' exceeds the limit '{lim_raw}'; the request must be at most the limit",
            )
        )
    cpath = dpath.child("cpu")
    cpu = as_map(domain.get("cpu"))
    topology: dict[str, int] = {}
    for key in ("cores", "sockets", "threads", "maxSockets"):
        if key in cpu:
            value = as_int(cpu.get(key))
            if value is None or value < 1:
                causes.append(
                    Cause(str(cpath.child(key)), f"{key} must be an integer of at least 1")
                )
            else:
                topology[key] = value
    if "maxSockets" in topology and topology["maxSockets"] < topology.get("sockets", 1):
        causes.append(
            Cause(
                str(cpath.child("maxSockets")), "maxSockets must be at least the number of sockets"
            )
        )
    dedicated = as_bool(cpu.get("dedicatedCpuPlacement")) is True
    if dedicated:
        if request is not None and limit is not None and request != limit:
            causes.append(
                Cause(
                    str(rpath.child("requests", "cpu")),
                    "with dedicatedCpuPlacement the CPU request must equal the CPU limit",
                )
            )
        amount = request if request is not None else limit
        if amount is not None and amount.denominator != 1:
            causes.append(
                Cause(
                    str(rpath.child("requests", "cpu")),
                    "with dedicatedCpuPlacement the CPU request must be a whole number of CPUs",
                )
            )
        vcpus = topology.get("cores", 1) * topology.get("sockets", 1) * topology.get("threads", 1)
        if (
            amount is not None
            and any(k in topology for k in ("cores", "sockets", "threads"))
            and amount != vcpus
        ):
            causes.append(
                Cause(
                    str(cpath),
                    f"with dedicatedCpuPlacement the {vcpus} vCPUs of cores x sockets x threads must "
                    f"equal the CPU request {amount}",
                )
            )
    if as_bool(cpu.get("isolateEmulatorThread")) is True and not dedicated:
        causes.append(
            Cause(
                str(cpath.child("isolateEmulatorThread")),
                "isolateEmulatorThread needs dedicatedCpuPlacement: true",
            )
        )
    numa = as_map(cpu.get("numa"))
    if "realtime" in cpu:
        if not dedicated:
            causes.append(
                Cause(str(cpath.child("realtime")), "realtime needs dedicatedCpuPlacement: true")
            )
        if "guestMappingPassthrough" not in numa:
            causes.append(
                Cause(
                    str(cpath.child("realtime")),
                    "realtime needs spec.domain.cpu.numa.guestMappingPassthrough",
                    CauseType.REQUIRED,
                )
            )
    if "guestMappingPassthrough" in numa:
        npath = cpath.child("numa", "guestMappingPassthrough")
        if not config.gate("NUMA"):
            causes.append(
                Cause(
                    str(npath), "NUMA passthrough needs the NUMA feature gate", CauseType.FORBIDDEN
                )
            )
        if not dedicated:
            causes.append(Cause(str(npath), "NUMA passthrough needs dedicatedCpuPlacement: true"))
        if "hugepages" not in as_map(domain.get("memory")):
            causes.append(Cause(str(npath), "NUMA passthrough needs spec.domain.memory.hugepages"))
    for i, raw in enumerate(as_list(cpu.get("features"))):
        policy = as_str(as_map(raw).get("policy"))
        if policy is not None and policy not in CPU_FEATURE_POLICIES:
            causes.append(
                Cause(
                    str(cpath.child("features").index(i).child("policy")),
                    f"CPU feature policy '{policy}' is not supported; use one of {', '.join(CPU_FEATURE_POLICIES)}",
                    CauseType.NOT_SUPPORTED,
                )
            )


def _check_firmware(domain: Mapping[str, Any], dpath: FieldPath, causes: list[Cause]) -> None:
    fpath = dpath.child("firmware")
    firmware = as_map(domain.get("firmware"))
    bootloader = as_map(firmware.get("bootloader"))
    bpath = fpath.child("bootloader")
    if "bios" in bootloader and "efi" in bootloader:
        causes.append(Cause(str(bpath), "set only one of bios or efi, not both"))
    if "efi" in bootloader:
        secure = as_bool(as_map(bootloader.get("efi")).get("secureBoot"))
        smm = as_map(domain.get("features")).get("smm")
        smm_on = isinstance(smm, Mapping) and as_bool(smm.get("enabled")) is not False
        if secure is not False and not smm_on:
            causes.append(
                Cause(
                    str(bpath.child("efi", "secureBoot")),
                    "EFI secure boot needs SMM: set spec.domain.features.smm.enabled: true, "
                    "or secureBoot: false",
                )
            )
    if "kernelBoot" in firmware:
        kpath = fpath.child("kernelBoot")
        kernel_boot = as_map(firmware.get("kernelBoot"))
        container = as_map(kernel_boot.get("container"))
        if "kernelArgs" in kernel_boot and not as_str(container.get("kernelPath")):
            causes.append(
                Cause(
                    str(kpath.child("kernelArgs")),
                    "kernelArgs need a kernel: set spec.domain.firmware.kernelBoot.container.kernelPath",
                )
            )
        if "container" in kernel_boot:
            cpath = kpath.child("container")
            if not as_str(container.get("image")):
                causes.append(
                    Cause(
                        str(cpath.child("image")),
                        "kernelBoot container needs an image",
                        CauseType.REQUIRED,
                    )
                )
            if "kernelPath" not in container and "initrdPath" not in container:
                causes.append(
                    Cause(
                        str(cpath),
                        "kernelBoot container needs kernelPath or initrdPath (or both)",
                        CauseType.REQUIRED,
                    )
                )
            for key in ("kernelPath", "initrdPath"):
                if key in container:
                    causes.extend(validate_path(container.get(key), cpath.child(key), key))
        elif "kernelArgs" not in kernel_boot:
            causes.append(
                Cause(
                    str(kpath.child("container")),
                    "kernelBoot needs a container",
                    CauseType.REQUIRED,
                )
            )


def _check_machine(spec: Mapping[str, Any], path: FieldPath, causes: list[Cause]) -> None:
    machine = as_str(as_map(as_map(spec.get("domain")).get("machine")).get("type"))
    arch = as_str(spec.get("architecture"))
    pattern = _MACHINES.get(arch or "amd64")
    if machine and pattern is not None and not pattern.match(machine):
        valid = {"amd64": "q35 or a pc-q35-* version", "arm64": "virt or a virt-* version"}
        causes.append(
            Cause(
                str(path.child("domain", "machine", "type")),
                f"machine type '{machine}' is not supported on {arch or 'amd64'}; use "
                + valid.get(arch or "amd64", "s390-ccw-virtio"),
                CauseType.NOT_SUPPORTED,
            )
        )
    if arch and arch not in ARCHITECTURES:
        causes.append(
            Cause(
                str(path.child("architecture")),
                f"architecture '{arch}' is not supported; use one of {', '.join(ARCHITECTURES)}",
                CauseType.NOT_SUPPORTED,
            )
        )
