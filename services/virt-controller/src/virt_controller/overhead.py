"""The launcher pod's memory overhead over the guest's memory (upstream's estimate)."""

from __future__ import annotations

import math
from fractions import Fraction

from kubevirt_api import Quantity, VirtualMachineInstance

__all__ = [
    "MiB",
    "dedicated_cpu",
    "memory_overhead",
    "vcpu_count",
    "wants_guaranteed_qos",
]

MiB = 1024 * 1024

# RSS of each process in the pod besides the guest's RAM, as upstream measured them.
_LAUNCHER_MONITOR = 25 * MiB
_LAUNCHER = 100 * MiB
_VIRTLOGD = 25 * MiB
_VIRTQEMUD = 40 * MiB  # our launcher runs libvirtd in its place
_QEMU = 30 * MiB
_PER_VCPU = 8 * MiB
_IOTHREAD = 8 * MiB
_VIDEO = 32 * MiB
_ARM64_PFLASH = 128 * MiB
_VFIO = 1024 * MiB
_DOWNWARD_METRICS = 1 * MiB
_PROBE = 10 * MiB
_PROBE_BINARY = 100 * MiB
_SEV = 256 * MiB
_SWTPM = 53 * MiB
_GUARANTEED = 100 * MiB


def _quantity(resources: object, kind: str, name: str) -> Quantity | None:
    table = getattr(resources, kind, None) if resources is not None else None
    if not table:
        return None
    found = table.get(name)
    return found if isinstance(found, Quantity) else None


def vcpu_count(vmi: VirtualMachineInstance) -> int:
    """sockets x cores x threads; without a topology the CPU limit or request; at least 1."""
    domain = vmi.spec.domain
    cpu = domain.cpu
    if cpu is not None:
        count = (cpu.sockets or 1) * (cpu.cores or 1) * (cpu.threads or 1)
    else:
        given = _quantity(domain.resources, "limits", "cpu") or _quantity(
            domain.resources, "requests", "cpu"
        )
        count = given.to_int() if given is not None else 0
    return max(1, count)


def wants_guaranteed_qos(vmi: VirtualMachineInstance) -> bool:
    """CPU and memory limits set, with requests absent or equal (a Guaranteed pod)."""
    res = vmi.spec.domain.resources
    for name in ("cpu", "memory"):
        limit = _quantity(res, "limits", name)
        request = _quantity(res, "requests", name)
        if limit is None or limit.value == 0 or (request is not None and request != limit):
            return False
    return True


def dedicated_cpu(vmi: VirtualMachineInstance) -> bool:
    cpu = vmi.spec.domain.cpu
    return bool(cpu is not None and cpu.dedicated_cpu_placement)


def _guest_memory_request(vmi: VirtualMachineInstance) -> int:
    requested = _quantity(vmi.spec.domain.resources, "requests", "memory")
    if requested is not None:
        return requested.to_int()
    memory = vmi.spec.domain.memory
    if memory is not None and memory.guest is not None:
        return memory.guest.to_int()
    return 0


def memory_overhead(
    vmi: VirtualMachineInstance, *, architecture: str = "amd64", ratio: str | None = None
) -> int:
    """Bytes the pod needs beyond the guest's RAM.

    Page tables (guest memory / 512), the fixed RSS of launcher, libvirt and QEMU, 8 MiB
    per vCPU and for the IO thread, video RAM, and the extras of VFIO, probes, SEV, TPM
    and dedicated CPUs; finally scaled by additionalGuestMemoryOverheadRatio.
    """
    spec = vmi.spec
    domain = spec.domain
    devices = domain.devices
    # Kubernetes' ScaledValue(Kilo) rounds up before the division.
    overhead = math.ceil(_guest_memory_request(vmi) / 1000) * 1000 // 512
    overhead += _LAUNCHER_MONITOR + _LAUNCHER + _VIRTLOGD + _VIRTQEMUD + _QEMU
    overhead += _PER_VCPU * vcpu_count(vmi)
    overhead += _IOTHREAD
    if devices.autoattach_graphics_device is not False:
        overhead += _VIDEO
    if architecture == "arm64":
        overhead += _ARM64_PFLASH
    sriov = any(i.sriov is not None for i in devices.interfaces or ())
    if devices.host_devices or devices.gpus or sriov:
        overhead += _VFIO
    if any(v.downward_metrics is not None for v in spec.volumes or ()):
        overhead += _DOWNWARD_METRICS
    liveness = spec.liveness_probe is not None and spec.liveness_probe.exec is not None
    readiness = spec.readiness_probe is not None and spec.readiness_probe.exec is not None
    overhead += _PROBE * (int(liveness) + int(readiness))
    if liveness or readiness:
        overhead += _PROBE_BINARY
    security = domain.launch_security
    if security is not None and (
        getattr(security, "sev", None) is not None or getattr(security, "snp", None) is not None
    ):
        overhead += _SEV
    if devices.tpm is not None and devices.tpm.enabled is not False:
        overhead += _SWTPM
    if dedicated_cpu(vmi) or wants_guaranteed_qos(vmi):
        overhead += _GUARANTEED
    if ratio:
        try:
            factor = Fraction(ratio)
        except (ValueError, ZeroDivisionError):
            return overhead  # refused by virt-api's validation; keep the unscaled estimate
        kilo = math.ceil(overhead / 1000)
        overhead += int(kilo * (factor - 1)) * 1000
    return overhead
