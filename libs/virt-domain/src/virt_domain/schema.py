# ruff: noqa: RUF009  (field specs are dataclasses.field() objects built by attr/child/text)
"""The libvirt domain model: ``<domain>`` and everything outside ``<devices>``.

Classes here only know their element (object <-> XML); policy lives in the converter's
configurators. Field order is document order and follows KubeVirt's output, so its
documents round-trip unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

from .devices import Devices
from .xmlmap import attr, child, format_xml, parse_xml, text

__all__ = [
    "CPU",
    "KUBEVIRT_NAMESPACE",
    "OS",
    "QEMU_NAMESPACE",
    "VCPU",
    "CPUFeature",
    "CPUTopology",
    "CPUTune",
    "CPUTuneEmulatorPin",
    "CPUTuneVCPUPin",
    "Clock",
    "Domain",
    "FeatureHyperv",
    "FeatureKVM",
    "FeatureSpinlocks",
    "FeatureState",
    "FeatureStimer",
    "FeatureTLBFlush",
    "FeatureVendorID",
    "Features",
    "FirmwareFeature",
    "FirmwareInfo",
    "GracePeriodMetadata",
    "HugePage",
    "HugePages",
    "IOThreads",
    "KubeVirtMetadata",
    "Loader",
    "Memory",
    "MemoryBacking",
    "MemoryBackingSource",
    "Metadata",
    "MigrationMetadata",
    "NVRam",
    "OSBios",
    "OSBoot",
    "OSBootMenu",
    "OSType",
    "SMBios",
    "SysInfo",
    "SysInfoEntry",
    "SysInfoSection",
    "Timer",
]

QEMU_NAMESPACE = "http://libvirt.org/schemas/domain/qemu/1.0"
KUBEVIRT_NAMESPACE = "http://kubevirt.io"
_KV = "{" + KUBEVIRT_NAMESPACE + "}"


# --- memory -----------------------------------------------------------------------------


@dataclass(slots=True, kw_only=True)
class Memory:
    """``<memory unit=…>N</memory>`` (also ``<currentMemory>``)."""

    unit: str = attr("unit")
    value: int = text(0)


@dataclass(slots=True, kw_only=True)
class HugePage:
    """``<page size=… unit=…>``."""

    size: str = attr("size")
    unit: str = attr("unit")
    nodeset: str | None = attr("nodeset", None)


@dataclass(slots=True, kw_only=True)
class HugePages:
    """``<hugepages>``."""

    pages: list[HugePage] = child("page", many=True)


@dataclass(slots=True, kw_only=True)
class MemoryBackingSource:
    """``<source type=…>`` of memory backing (memfd, file)."""

    type: str = attr("type")


@dataclass(slots=True, kw_only=True)
class MemoryBacking:
    """``<memoryBacking>``."""

    hugepages: HugePages | None = child("hugepages", None)
    source: MemoryBackingSource | None = child("source", None)
    nosharepages: bool = child("nosharepages", False)


# --- os and firmware --------------------------------------------------------------------


@dataclass(slots=True, kw_only=True)
class FirmwareFeature:
    """``<feature enabled=… name=…>`` inside ``<os><firmware>``."""

    enabled: str = attr("enabled")
    name: str = attr("name")


@dataclass(slots=True, kw_only=True)
class FirmwareInfo:
    """``<firmware>`` inside ``<os>``: features auto-selection must honour."""

    features: list[FirmwareFeature] = child("feature", many=True)


@dataclass(slots=True, kw_only=True)
class OSType:
    """``<type arch=… machine=…>hvm</type>``."""

    arch: str | None = attr("arch", None)
    machine: str | None = attr("machine", None)
    os: str = text("hvm")


@dataclass(slots=True, kw_only=True)
class SMBios:
    """``<smbios mode=…>``."""

    mode: str = attr("mode")


@dataclass(slots=True, kw_only=True)
class OSBoot:
    """``<boot dev=…>``."""

    dev: str = attr("dev")


@dataclass(slots=True, kw_only=True)
class OSBootMenu:
    """``<bootmenu enable=… timeout=…>``."""

    enable: str = attr("enable")
    timeout: int | None = attr("timeout", None)


@dataclass(slots=True, kw_only=True)
class OSBios:
    """``<bios useserial=…>``."""

    useserial: str | None = attr("useserial", None)


@dataclass(slots=True, kw_only=True)
class Loader:
    """``<loader>``: the firmware image (OVMF for EFI)."""

    readonly: str | None = attr("readonly", None)
    secure: str | None = attr("secure", None)
    type: str | None = attr("type", None)
    path: str = text("")


@dataclass(slots=True, kw_only=True)
class NVRam:
    """``<nvram template=…>path</nvram>``: the EFI variable store."""

    template: str | None = attr("template", None)
    format: str | None = attr("format", None)
    path: str = text("")


@dataclass(slots=True, kw_only=True)
class OS:
    """``<os>``: machine type, firmware, boot, direct kernel boot."""

    firmware: str | None = attr("firmware", None)
    firmware_info: FirmwareInfo | None = child("firmware", None)
    type: OSType = child("type", factory=OSType)
    smbios: SMBios | None = child("smbios", None)
    boot: list[OSBoot] = child("boot", many=True)
    bootmenu: OSBootMenu | None = child("bootmenu", None)
    bios: OSBios | None = child("bios", None)
    loader: Loader | None = child("loader", None)
    nvram: NVRam | None = child("nvram", None)
    kernel: str | None = child("kernel", None)
    initrd: str | None = child("initrd", None)
    cmdline: str | None = child("cmdline", None)


# --- sysinfo ----------------------------------------------------------------------------


@dataclass(slots=True, kw_only=True)
class SysInfoEntry:
    """``<entry name=…>value</entry>``."""

    name: str = attr("name")
    value: str = text("")


@dataclass(slots=True, kw_only=True)
class SysInfoSection:
    """A ``<system>``/``<bios>``/``<baseBoard>``/``<chassis>`` block of entries."""

    entries: list[SysInfoEntry] = child("entry", many=True)


@dataclass(slots=True, kw_only=True)
class SysInfo:
    """``<sysinfo type='smbios'>``."""

    type: str = attr("type")
    system: SysInfoSection | None = child("system", None)
    bios: SysInfoSection | None = child("bios", None)
    base_board: SysInfoSection | None = child("baseBoard", None)
    chassis: SysInfoSection | None = child("chassis", None)


# --- clock ------------------------------------------------------------------------------


@dataclass(slots=True, kw_only=True)
class Timer:
    """``<timer>``."""

    name: str = attr("name")
    tickpolicy: str | None = attr("tickpolicy", None)
    present: str | None = attr("present", None)
    track: str | None = attr("track", None)
    frequency: str | None = attr("frequency", None)


@dataclass(slots=True, kw_only=True)
class Clock:
    """``<clock>``."""

    offset: str | None = attr("offset", None)
    timezone: str | None = attr("timezone", None)
    adjustment: str | None = attr("adjustment", None)
    timers: list[Timer] = child("timer", many=True)


# --- metadata ---------------------------------------------------------------------------


@dataclass(slots=True, kw_only=True)
class GracePeriodMetadata:
    """``<graceperiod>``: the VMI's termination grace period, read back on shutdown."""

    deletion_grace_period_seconds: int = child(_KV + "deletionGracePeriodSeconds", 0)
    deletion_timestamp: str | None = child(_KV + "deletionTimestamp", None)


@dataclass(slots=True, kw_only=True)
class MigrationMetadata:
    """``<migration>``: the live migration this domain takes part in (upstream's
    ``kubevirt.migration``); timestamps are RFC 3339, statuses upstream's words."""

    uid: str | None = child(_KV + "uid", None)
    start_timestamp: str | None = child(_KV + "startTimestamp", None)
    end_timestamp: str | None = child(_KV + "endTimestamp", None)
    completed: bool = child(_KV + "completed", False)
    failed: bool = child(_KV + "failed", False)
    failure_reason: str | None = child(_KV + "failureReason", None)
    abort_status: str | None = child(_KV + "abortStatus", None)
    mode: str | None = child(_KV + "mode", None)


@dataclass(slots=True, kw_only=True)
class KubeVirtMetadata:
    """``<kubevirt xmlns='http://kubevirt.io'>``: what the launcher remembers per domain."""

    uid: str | None = child(_KV + "uid", None)
    grace_period: GracePeriodMetadata | None = child(_KV + "graceperiod", None)
    migration: MigrationMetadata | None = child(_KV + "migration", None)


@dataclass(slots=True, kw_only=True)
class Metadata:
    """``<metadata>``."""

    kubevirt: KubeVirtMetadata | None = child(_KV + "kubevirt", None)


# --- features ---------------------------------------------------------------------------


@dataclass(slots=True, kw_only=True)
class FeatureState:
    """An element carrying only ``state='on'|'off'``."""

    state: str | None = attr("state", None)


@dataclass(slots=True, kw_only=True)
class FeatureSpinlocks:
    """``<spinlocks state=… retries=…>``."""

    state: str | None = attr("state", None)
    retries: int | None = attr("retries", None)


@dataclass(slots=True, kw_only=True)
class FeatureStimer:
    """``<stimer state=…><direct state=…/></stimer>``."""

    direct: FeatureState | None = child("direct", None)
    state: str | None = attr("state", None)


@dataclass(slots=True, kw_only=True)
class FeatureTLBFlush:
    """``<tlbflush state=…>`` with optional direct/extended."""

    direct: FeatureState | None = child("direct", None)
    extended: FeatureState | None = child("extended", None)
    state: str | None = attr("state", None)


@dataclass(slots=True, kw_only=True)
class FeatureVendorID:
    """``<vendor_id state=… value=…>``."""

    state: str | None = attr("state", None)
    value: str | None = attr("value", None)


@dataclass(slots=True, kw_only=True)
class FeatureHyperv:
    """``<hyperv>``: the Hyper-V enlightenments."""

    mode: str | None = attr("mode", None)
    relaxed: FeatureState | None = child("relaxed", None)
    vapic: FeatureState | None = child("vapic", None)
    spinlocks: FeatureSpinlocks | None = child("spinlocks", None)
    vpindex: FeatureState | None = child("vpindex", None)
    runtime: FeatureState | None = child("runtime", None)
    synic: FeatureState | None = child("synic", None)
    stimer: FeatureStimer | None = child("stimer", None)
    reset: FeatureState | None = child("reset", None)
    vendor_id: FeatureVendorID | None = child("vendor_id", None)
    frequencies: FeatureState | None = child("frequencies", None)
    reenlightenment: FeatureState | None = child("reenlightenment", None)
    tlbflush: FeatureTLBFlush | None = child("tlbflush", None)
    ipi: FeatureState | None = child("ipi", None)
    evmcs: FeatureState | None = child("evmcs", None)


@dataclass(slots=True, kw_only=True)
class FeatureKVM:
    """``<kvm>``: hide KVM from the guest, dedicated-CPU hint."""

    hidden: FeatureState | None = child("hidden", None)
    hint_dedicated: FeatureState | None = child("hint-dedicated", None)


@dataclass(slots=True, kw_only=True)
class Features:
    """``<features>``."""

    acpi: bool = child("acpi", False)
    apic: bool = child("apic", False)
    hyperv: FeatureHyperv | None = child("hyperv", None)
    smm: bool = child("smm", False)
    kvm: FeatureKVM | None = child("kvm", None)
    pvspinlock: FeatureState | None = child("pvspinlock", None)
    pmu: FeatureState | None = child("pmu", None)
    vmport: FeatureState | None = child("vmport", None)


# --- cpu --------------------------------------------------------------------------------


@dataclass(slots=True, kw_only=True)
class CPUFeature:
    """``<feature name=… policy=…>``."""

    name: str = attr("name")
    policy: str | None = attr("policy", None)


@dataclass(slots=True, kw_only=True)
class CPUTopology:
    """``<topology sockets=… cores=… threads=…>``."""

    sockets: int | None = attr("sockets", None)
    cores: int | None = attr("cores", None)
    threads: int | None = attr("threads", None)


@dataclass(slots=True, kw_only=True)
class CPU:
    """``<cpu>``: mode, model, features, topology."""

    mode: str | None = attr("mode", None)
    model: str | None = child("model", None)
    features: list[CPUFeature] = child("feature", many=True)
    topology: CPUTopology | None = child("topology", None)


@dataclass(slots=True, kw_only=True)
class VCPU:
    """``<vcpu placement=…>N</vcpu>``."""

    placement: str | None = attr("placement", None)
    count: int = text(1)


@dataclass(slots=True, kw_only=True)
class CPUTuneVCPUPin:
    """``<vcpupin vcpu=… cpuset=…>``."""

    vcpu: int = attr("vcpu")
    cpuset: str = attr("cpuset")


@dataclass(slots=True, kw_only=True)
class CPUTuneEmulatorPin:
    """``<emulatorpin cpuset=…>``."""

    cpuset: str = attr("cpuset")


@dataclass(slots=True, kw_only=True)
class CPUTune:
    """``<cputune>``: vCPU and emulator pinning."""

    vcpupins: list[CPUTuneVCPUPin] = child("vcpupin", many=True)
    emulatorpin: CPUTuneEmulatorPin | None = child("emulatorpin", None)


@dataclass(slots=True, kw_only=True)
class IOThreads:
    """``<iothreads>N</iothreads>``."""

    count: int = text(0)


# --- the domain -------------------------------------------------------------------------


@dataclass(slots=True, kw_only=True)
class Domain:
    """``<domain>``: the whole libvirt domain definition."""

    TAG = "domain"

    type: str = attr("type", "kvm")
    xmlns_qemu: str | None = attr("xmlns:qemu", None)
    name: str = child("name", "")
    uuid: str | None = child("uuid", None)
    memory: Memory = child("memory", factory=lambda: Memory(unit="b"))
    current_memory: Memory | None = child("currentMemory", None)
    memory_backing: MemoryBacking | None = child("memoryBacking", None)
    os: OS = child("os", factory=OS)
    sysinfo: SysInfo | None = child("sysinfo", None)
    devices: Devices = child("devices", factory=Devices)
    clock: Clock | None = child("clock", None)
    metadata: Metadata | None = child("metadata", None)
    features: Features | None = child("features", None)
    cpu: CPU | None = child("cpu", None)
    vcpu: VCPU | None = child("vcpu", None)
    cputune: CPUTune | None = child("cputune", None)
    iothreads: IOThreads | None = child("iothreads", None)
    on_poweroff: str | None = child("on_poweroff", None)
    on_reboot: str | None = child("on_reboot", None)
    on_crash: str | None = child("on_crash", None)

    def to_xml(self) -> str:
        """The domain as libvirt XML (deterministic for equal objects)."""
        return format_xml(self)

    @classmethod
    def from_xml(cls, document: str | bytes) -> Domain:
        """Parse a domain document; raise `XmlError` naming the bad path."""
        return parse_xml(cls, document)
