"""What every configurator sees: the VMI, the explicit host facts, the layout."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal, Protocol

from kubevirt_api import Quantity, VirtualMachineInstance
from kubevirt_api.hotplug import hotpluggable_volumes
from kubevirt_api.models import Devices, DomainSpec, Volume

from ..errors import ConversionError
from ..layout import LauncherLayout, check_component
from ..podnetwork import PodNetwork
from ..schema import Domain
from .pci import PciAddresses

__all__ = [
    "Configurator",
    "Context",
    "ConverterOptions",
    "SMBiosInfo",
    "Topology",
    "hotpluggable_volumes",
    "topology_of",
]


@dataclass(frozen=True, slots=True)
class SMBiosInfo:
    """Cluster-wide SMBIOS system entries (KubeVirt's ``smbios`` configuration).

    The defaults are KubeVirt's cluster defaults.
    """

    manufacturer: str = "KubeVirt"
    family: str = "KubeVirt"
    product: str = "None"
    sku: str = ""
    version: str = ""


@dataclass(frozen=True, slots=True)
class ConverterOptions:
    """Host and cluster facts the converter takes as input; it never probes for them."""

    #: Run the guest under TCG (``<domain type='qemu'>``): set when the cluster allows
    #: emulation (``developerConfiguration.useEmulation``) or KVM cannot run guests here.
    use_emulation: bool = False
    #: Volumes whose PVC/DataVolume is a block device (the rest are filesystem images).
    block_volumes: frozenset[str] = frozenset()
    #: Hotplugged volumes whose image is in the pod now (`LauncherLayout.hotplug_disk_image`):
    #: each gets its disk. The VMI's other hotpluggable volumes get none (not yet
    #: mounted, or being removed); that is no error.
    hotplug_volumes: frozenset[str] = frozenset()
    #: Image format of each containerDisk volume's file (``raw``/``qcow2``, default qcow2).
    container_disk_formats: Mapping[str, Literal["raw", "qcow2"]] = field(default_factory=dict)
    #: A containerDisk volume's image file where it is not the layout's copy path: an
    #: image volume's `disk/<file>` (`LauncherLayout.container_disk_image_dir`), which the
    #: launcher finds in its pod.
    container_disk_images: Mapping[str, str] = field(default_factory=dict)
    #: Host tap device for each interface, made by virt-handler; default: the name scheme's
    #: (`virt_domain.namescheme`: ``tap0`` on the pod network, ``tap<hash>`` on Multus).
    tap_devices: Mapping[str, str] = field(default_factory=dict)
    #: What virt-handler's network setup made for each pod-network interface (tap, MAC,
    #: MTU); they fill the domain's ``<interface>``. Empty (``virtctl convert``): the
    #: ``tap_devices`` tap, the spec's MAC if any, no MTU.
    pod_networks: tuple[PodNetwork, ...] = ()
    #: Host CPUs the launcher pod owns, for dedicated CPU placement (vCPU i -> cpus[i]).
    dedicated_cpus: tuple[int, ...] = ()
    smbios: SMBiosInfo | None = field(default_factory=SMBiosInfo)
    memballoon_stats_period: int = 10
    free_page_reporting: bool = True
    #: Keep serial console output in a log file (``<log file=…>``) while nobody reads.
    serial_console_log: bool = True


@dataclass(frozen=True, slots=True)
class Topology:
    """Guest CPU topology."""

    sockets: int
    cores: int
    threads: int

    @property
    def vcpus(self) -> int:
        """Total vCPUs."""
        return self.sockets * self.cores * self.threads


class Context:
    """The VMI plus options and layout, with facts several configurators derive."""

    def __init__(
        self,
        vmi: VirtualMachineInstance,
        options: ConverterOptions,
        layout: LauncherLayout,
    ) -> None:
        self.vmi = vmi
        self.options = options
        self.layout = layout
        meta = vmi.metadata
        if meta is None or not meta.name:
            raise ConversionError("metadata.name", "required: the domain is named after it")
        self.name: str = check_component("metadata.name", meta.name)
        self.namespace: str = check_component("metadata.namespace", meta.namespace or "default")
        if not meta.uid:
            raise ConversionError(
                "metadata.uid", "required: the launcher's socket paths are keyed by it"
            )
        self.uid: str = check_component("metadata.uid", meta.uid)

    @cached_property
    def pci_addresses(self) -> PciAddresses:
        """Guest PCI addresses claimed so far (shared by disks and interfaces)."""
        return PciAddresses()

    @property
    def domain_spec(self) -> DomainSpec:
        """``spec.domain``."""
        return self.vmi.spec.domain

    @property
    def devices(self) -> Devices:
        """``spec.domain.devices``."""
        return self.vmi.spec.domain.devices

    @cached_property
    def volumes(self) -> dict[str, tuple[int, Volume]]:
        """Volumes by name, with their index in ``spec.volumes``."""
        found: dict[str, tuple[int, Volume]] = {}
        for index, volume in enumerate(self.vmi.spec.volumes or ()):
            if volume.name in found:
                raise ConversionError(
                    f"spec.volumes[{index}].name",
                    f"duplicate volume name {volume.name!r}; volume names must be unique",
                )
            found[volume.name] = (index, volume)
        return found

    @cached_property
    def hotpluggable_volumes(self) -> frozenset[str]:
        """`hotpluggable_volumes` of the VMI."""
        return hotpluggable_volumes(self.vmi)

    @cached_property
    def topology(self) -> Topology:
        """sockets/cores/threads, defaulting each to 1 (or sockets to the CPU request)."""
        return topology_of(self.domain_spec)

    @cached_property
    def guest_memory(self) -> int:
        """Guest memory in bytes: memory.guest, else requests.memory, else limits.memory."""
        memory = self.domain_spec.memory
        if memory is not None and memory.guest is not None:
            return _bytes("spec.domain.memory.guest", memory.guest)
        resources = self.domain_spec.resources
        for kind in ("requests", "limits"):
            values = getattr(resources, kind, None) if resources is not None else None
            if values and "memory" in values:
                return _bytes(f"spec.domain.resources.{kind}.memory", values["memory"])
        raise ConversionError(
            "spec.domain.memory.guest",
            "guest memory is not set: give memory.guest or resources.requests.memory",
        )

    @cached_property
    def virtio_model(self) -> str:
        """``virtio-transitional`` when the VMI asks for it, else non-transitional."""
        if self.devices.use_virtio_transitional:
            return "virtio-transitional"
        return "virtio-non-transitional"


def topology_of(domain: DomainSpec) -> Topology:
    """A VMI's guest CPU topology: sockets/cores/threads, each defaulting to 1 (sockets to
    the whole CPUs requested when no topology is given, like KubeVirt)."""
    cpu = domain.cpu
    sockets = (cpu.sockets if cpu else None) or 0
    cores = (cpu.cores if cpu else None) or 0
    threads = (cpu.threads if cpu else None) or 0
    if sockets == cores == threads == 0:
        sockets = _whole_cpus(domain.resources)
    return Topology(sockets=sockets or 1, cores=cores or 1, threads=threads or 1)


def _whole_cpus(resources: object) -> int:
    for kind in ("limits", "requests"):
        values = getattr(resources, kind, None)
        if values and "cpu" in values:
            quantity: Quantity = values["cpu"]
            return max(1, math.ceil(quantity.value))
    return 1


def _bytes(path: str, quantity: Quantity) -> int:
    if quantity.value <= 0:
        raise ConversionError(path, f"{quantity} must be a positive amount of memory")
    if quantity.value.denominator != 1:
        raise ConversionError(path, f"{quantity} is not a whole number of bytes")
    return int(quantity.value)


class Configurator(Protocol):
    """One step of the conversion: reads the context, fills its part of the domain."""

    def __call__(self, ctx: Context, domain: Domain, /) -> None: ...
