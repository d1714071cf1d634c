"""``<features>``: ACPI, APIC, SMM, Hyper-V enlightenments, KVM hiding, pvspinlock."""

from __future__ import annotations

from kubevirt_api.models import FeatureState as VmiFeatureState

from ..schema import (
    Domain,
    FeatureHyperv,
    FeatureKVM,
    Features,
    FeatureSpinlocks,
    FeatureState,
    FeatureStimer,
    FeatureTLBFlush,
    FeatureVendorID,
)
from .context import Context
from .firmware import uses_secure_boot

__all__ = ["configure"]


def _on_off(enabled: bool | None) -> str:
    return "off" if enabled is False else "on"


def _state(source: VmiFeatureState | None) -> FeatureState | None:
    return None if source is None else FeatureState(state=_on_off(source.enabled))


def configure(ctx: Context, domain: Domain) -> None:
    """Translate ``spec.domain.features``; ACPI is on unless disabled."""
    source = ctx.domain_spec.features
    features = Features()
    domain.features = features
    features.acpi = source is None or source.acpi is None or source.acpi.enabled is not False
    # SMM is required by secure boot (the firmware configurator checks it is not disabled).
    features.smm = uses_secure_boot(ctx)
    # QEMU's VMware I/O port is of no use to KubeVirt guests; x86 turns it off.
    features.vmport = FeatureState(state="off")
    if source is None:
        return
    if source.smm is not None and source.smm.enabled is not False:
        features.smm = True
    if source.apic is not None and source.apic.enabled is not False:
        features.apic = True
    hyperv = source.hyperv
    if hyperv is not None:
        features.hyperv = FeatureHyperv(
            relaxed=_state(hyperv.relaxed),
            vapic=_state(hyperv.vapic),
            spinlocks=None
            if hyperv.spinlocks is None
            else FeatureSpinlocks(
                state=_on_off(hyperv.spinlocks.enabled),
                retries=(hyperv.spinlocks.spinlocks or 4096)
                if hyperv.spinlocks.enabled is not False
                else hyperv.spinlocks.spinlocks,
            ),
            vpindex=_state(hyperv.vpindex),
            runtime=_state(hyperv.runtime),
            synic=_state(hyperv.synic),
            stimer=None
            if hyperv.synictimer is None
            else FeatureStimer(
                state=_on_off(hyperv.synictimer.enabled),
                direct=_state(hyperv.synictimer.direct),
            ),
            reset=_state(hyperv.reset),
            vendor_id=None
            if hyperv.vendorid is None
            else FeatureVendorID(
                state=_on_off(hyperv.vendorid.enabled), value=hyperv.vendorid.vendorid or None
            ),
            frequencies=_state(hyperv.frequencies),
            reenlightenment=_state(hyperv.reenlightenment),
            tlbflush=None
            if hyperv.tlbflush is None
            else FeatureTLBFlush(
                state=_on_off(hyperv.tlbflush.enabled),
                direct=_state(hyperv.tlbflush.direct),
                extended=_state(hyperv.tlbflush.extended),
            ),
            ipi=_state(hyperv.ipi),
            evmcs=_state(hyperv.evmcs),
        )
    elif source.hyperv_passthrough is not None and source.hyperv_passthrough.enabled:
        features.hyperv = FeatureHyperv(mode="passthrough")
    if source.kvm is not None:
        features.kvm = FeatureKVM(hidden=FeatureState(state="on" if source.kvm.hidden else "off"))
    if source.pvspinlock is not None:
        features.pvspinlock = FeatureState(state=_on_off(source.pvspinlock.enabled))
