"""``<cpu>``, ``<vcpu>`` and ``<cputune>``: mode or model, features, topology, pinning."""

from __future__ import annotations

from ..errors import ConversionError
from ..schema import (
    CPU,
    VCPU,
    CPUFeature,
    CPUTopology,
    CPUTune,
    CPUTuneVCPUPin,
    Domain,
    FeatureKVM,
    Features,
    FeatureState,
)
from .context import Context

__all__ = ["configure"]

_HOST_MODES = ("host-model", "host-passthrough")
_POLICIES = ("force", "require", "optional", "disable", "forbid")


def configure(ctx: Context, domain: Domain) -> None:
    """Topology from the VMI (or its CPU request), host-model unless a model is named."""
    source = ctx.domain_spec.cpu
    topology = ctx.topology
    cpu = CPU(
        topology=CPUTopology(
            sockets=topology.sockets, cores=topology.cores, threads=topology.threads
        )
    )
    model = source.model if source is not None else None
    if not model or model in _HOST_MODES:
        cpu.mode = model or "host-model"
    else:
        cpu.mode = "custom"
        cpu.model = model
    for index, feature in enumerate((source.features if source else None) or ()):
        policy = feature.policy or "require"
        if policy not in _POLICIES:
            raise ConversionError(
                f"spec.domain.cpu.features[{index}].policy",
                f"unknown policy {policy!r}; valid: {', '.join(_POLICIES)}",
            )
        cpu.features.append(CPUFeature(name=feature.name, policy=policy))
    domain.cpu = cpu
    domain.vcpu = VCPU(placement="static", count=topology.vcpus)
    if source is not None and source.dedicated_cpu_placement:
        _pin(ctx, domain)


def _pin(ctx: Context, domain: Domain) -> None:
    """Dedicated placement: vCPU i runs on the i-th host CPU the launcher owns."""
    cpus = ctx.options.dedicated_cpus
    vcpus = ctx.topology.vcpus
    if cpus:
        if len(cpus) < vcpus:
            raise ConversionError(
                "spec.domain.cpu.dedicatedCpuPlacement",
                f"{vcpus} vCPUs need {vcpus} dedicated host CPUs, the launcher has {len(cpus)}",
            )
        domain.cputune = CPUTune(
            vcpupins=[CPUTuneVCPUPin(vcpu=i, cpuset=str(cpus[i])) for i in range(vcpus)]
        )
    # Tell the guest its vCPUs are not shared, so it can skip paravirt spinlock work.
    if domain.features is None:
        domain.features = Features()
    if domain.features.kvm is None:
        domain.features.kvm = FeatureKVM()
    domain.features.kvm.hint_dedicated = FeatureState(state="on")
