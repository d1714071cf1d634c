"""Network interfaces: masquerade and bridge bindings as ethernet taps.

virt-handler creates (and wires) a tap per interface in the launcher pod; the domain
names it with ``managed='no'`` so libvirt uses it as is. The tap's name follows
upstream's name scheme (`virt_domain.namescheme`): `tap0` for the pod network (or the
Multus default network), `tap<hash>` for a secondary Multus network's bridge binding.
"""

from __future__ import annotations

import re

from kubevirt_api import VirtualMachineInstance
from kubevirt_api.models import Interface as VmiInterface

from ..devices import (
    Alias,
    BootOrder,
    Interface,
    InterfaceACPI,
    InterfaceDriver,
    InterfaceModel,
    InterfaceSource,
    InterfaceTarget,
    LinkState,
    Mac,
    Mtu,
    Rom,
)
from ..errors import ConversionError
from ..layout import check_component
from ..namescheme import PRIMARY_TAP, pod_links
from ..schema import Domain
from .context import Context, topology_of

__all__ = ["MODELS", "configure", "interface_queues", "tap_device"]

MODELS = ("virtio", "e1000", "e1000e", "igb", "ne2k_pci", "pcnet", "rtl8139")
_MAC = re.compile(r"^([0-9A-Fa-f]{2}[:-]){5}[0-9A-Fa-f]{2}$")
_TAP = re.compile(r"^[A-Za-z0-9_.-]{1,15}$")
_REFUSED_BINDINGS = {
    "sriov": "SR-IOV needs the SR-IOV device plugin, which this cluster does not run",
    "slirp": "slirp binding was removed upstream; use masquerade",
    "macvtap": "macvtap binding was removed upstream; use bridge",
    "passt": "the passt binding is not supported; use masquerade",
    "passt_binding": "the passt binding is not supported; use masquerade",
    "binding": "network binding plugins are not supported; use masquerade or bridge",
}


def tap_device(ctx: Context, name: str) -> str | None:
    """The host tap of interface ``name``: option ``tap_devices``, else the name scheme's.

    None: the interface's network has no link in the pod (a second pod network).
    """
    if name in ctx.options.tap_devices:
        return ctx.options.tap_devices[name]
    networks = ctx.vmi.spec.networks
    if not networks:
        return PRIMARY_TAP  # the implicit pod network
    links = pod_links(networks).get(name)
    return links.tap if links is not None else None


def _interfaces(ctx: Context) -> tuple[VmiInterface, ...]:
    interfaces = ctx.devices.interfaces
    if (
        interfaces is None
        and not ctx.vmi.spec.networks
        and ctx.devices.autoattach_pod_interface is not False
    ):
        # Like KubeVirt's defaulting: a VMI without networking gets the pod network.
        return (VmiInterface(name="default"),)
    return interfaces or ()


def _multiqueue(vmi: VirtualMachineInstance) -> int | None:
    domain = vmi.spec.domain
    return topology_of(domain).vcpus if domain.devices.network_interface_multiqueue else None


def interface_queues(vmi: VirtualMachineInstance, interface: VmiInterface) -> int:
    """How many queues `interface`'s NIC (and so its tap) has: one per vCPU for a virtio
    NIC with `networkInterfaceMultiqueue`, else 1. virt-handler makes the tap multi-queue
    when this is above 1, or QEMU cannot open it once per queue."""
    queues = _multiqueue(vmi)
    return queues if queues and (interface.model or "virtio") == "virtio" else 1


def configure(ctx: Context, domain: Domain) -> None:
    """One ethernet ``<interface>`` per VMI interface (pod network or Multus, bridge binding)."""
    networks = {network.name: network for network in ctx.vmi.spec.networks or ()}
    implicit = ctx.devices.interfaces is None and not networks
    seen: set[str] = set()
    taps: set[str] = set()
    pod_networks = {n.interface: n for n in ctx.options.pod_networks}
    queues = _multiqueue(ctx.vmi)
    for index, source in enumerate(_interfaces(ctx)):
        path = f"spec.domain.devices.interfaces[{index}]"
        name = check_component(f"{path}.name", source.name)
        if name in seen:
            raise ConversionError(f"{path}.name", f"duplicate interface name {name!r}")
        seen.add(name)
        if source.state == "absent":
            continue
        network = networks.get(name)
        if network is None and not implicit:
            raise ConversionError(
                f"{path}.name", f"no network named {name!r} in spec.networks; add one"
            )
        if network is not None and network.multus is not None and source.masquerade is not None:
            raise ConversionError(
                f"{path}.masquerade",
                f"masquerade is only allowed on the pod network; use bridge for network {name!r}",
            )
        if network is not None and network.resource_claim is not None:
            raise ConversionError(
                f"spec.networks[{list(networks).index(name)}].resourceClaim",
                "DRA network devices are not supported",
            )
        for attribute, reason in _REFUSED_BINDINGS.items():
            if getattr(source, attribute) is not None:
                raise ConversionError(f"{path}.{_camel(attribute)}", reason)
        model = source.model or "virtio"
        if model not in MODELS:
            raise ConversionError(
                f"{path}.model", f"unknown model {model!r}; valid: {', '.join(MODELS)}"
            )
        pod_network = pod_networks.get(name)
        tap = tap_device(ctx, name) if pod_network is None else pod_network.tap
        if tap is None:
            source_field = "pod" if network is not None and network.pod is not None else "multus"
            raise ConversionError(
                f"spec.networks[{list(networks).index(name)}].{source_field}",
                "only one primary network (pod, or multus with default: true) is allowed: "
                "the pod has one eth0",
            )
        if not _TAP.match(tap):
            raise ConversionError(f"{path}.name", f"tap device {tap!r} is not a valid link name")
        if tap in taps:
            raise ConversionError(f"{path}.name", f"tap device {tap!r} is used twice")
        taps.add(tap)
        interface = Interface(
            type="ethernet",
            source=InterfaceSource(),
            target=InterfaceTarget(dev=tap, managed="no"),
            model=InterfaceModel(type=ctx.virtio_model if model == "virtio" else model),
            alias=Alias.of_user_device(name),
        )
        if source.mac_address:
            if not _MAC.match(source.mac_address):
                raise ConversionError(
                    f"{path}.macAddress", f"{source.mac_address!r} is not a MAC address"
                )
            interface.mac = Mac(address=source.mac_address.replace("-", ":").lower())
        if pod_network is not None:
            # Phase 1's MAC is the spec's when it has one, else the pod's eth0's.
            interface.mac = Mac(address=pod_network.mac)
            interface.mtu = Mtu(size=str(pod_network.mtu))
        if source.pci_address:
            interface.address = ctx.pci_addresses.claim(f"{path}.pciAddress", source.pci_address)
        if source.acpi_index:
            interface.acpi = InterfaceACPI(index=source.acpi_index)
        if source.boot_order is not None:
            interface.boot = BootOrder(order=source.boot_order)
        else:
            # No PXE wanted: skip the option ROM (faster boot, less guest memory).
            interface.rom = Rom(enabled="no")
        if source.state == "down":
            interface.link = LinkState(state="down")
        if model == "virtio" and queues:
            interface.driver = InterfaceDriver(name="vhost", queues=queues)
        domain.devices.interfaces.append(interface)


def _camel(attribute: str) -> str:
    head, *rest = attribute.split("_")
    return head + "".join(part.capitalize() for part in rest)
