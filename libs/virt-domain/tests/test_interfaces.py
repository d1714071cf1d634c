"""Interfaces: ethernet taps with aliases, MACs, models; refusals."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from virt_domain import ConversionError, ConverterOptions, Domain
from virt_domain.podnetwork import Binding, PodNetwork

Converter = Callable[..., Domain]

POD = [{"name": "default", "pod": {}}]


def test_masquerade_becomes_an_unmanaged_tap(to_domain: Converter) -> None:
    domain = to_domain(
        {
            "devices": {
                "interfaces": [
                    {"name": "default", "masquerade": {}, "macAddress": "02-00-00-AA-bb-01"}
                ]
            }
        },
        networks=POD,
    )
    (iface,) = domain.devices.interfaces
    assert iface.type == "ethernet"
    assert iface.target is not None
    assert (iface.target.dev, iface.target.managed) == ("tap0", "no")
    assert iface.alias is not None
    assert iface.alias.name == "ua-default"
    assert iface.mac is not None
    assert iface.mac.address == "02:00:00:aa:bb:01"
    assert iface.model is not None
    assert iface.model.type == "virtio-non-transitional"
    assert iface.rom is not None
    assert iface.rom.enabled == "no"


def test_bridge_with_model_boot_order_and_tap_name(to_domain: Converter) -> None:
    domain = to_domain(
        {
            "devices": {
                "interfaces": [{"name": "default", "bridge": {}, "model": "e1000", "bootOrder": 1}]
            }
        },
        networks=POD,
        options=ConverterOptions(tap_devices={"default": "tap-pod"}),
    )
    (iface,) = domain.devices.interfaces
    assert iface.model is not None
    assert iface.model.type == "e1000"
    assert iface.boot is not None
    assert (iface.boot.order, iface.rom) == (1, None)
    assert iface.target is not None
    assert iface.target.dev == "tap-pod"


def test_phase_one_tap_mac_and_mtu_fill_the_interface(to_domain: Converter) -> None:
    made = PodNetwork(
        interface="default",
        binding=Binding.MASQUERADE,
        tap="tap0",
        bridge="k6t-eth0",
        mac="0a:58:0a:f4:00:07",
        mtu=1450,
    )
    domain = to_domain(
        {"devices": {"interfaces": [{"name": "default", "masquerade": {}}]}},
        networks=POD,
        # The handler's network facts win over a stale tap_devices entry.
        options=ConverterOptions(tap_devices={"default": "tap9"}, pod_networks=(made,)),
    )
    (iface,) = domain.devices.interfaces
    assert iface.target is not None
    assert (iface.target.dev, iface.target.managed) == ("tap0", "no")
    assert iface.mac is not None
    assert iface.mac.address == "0a:58:0a:f4:00:07"
    assert iface.mtu is not None
    assert iface.mtu.size == "1450"
    assert iface.alias is not None
    assert iface.alias.name == "ua-default"


def test_without_network_facts_there_is_no_mtu_and_no_invented_mac(to_domain: Converter) -> None:
    (iface,) = to_domain(
        {"devices": {"interfaces": [{"name": "default", "masquerade": {}}]}}, networks=POD
    ).devices.interfaces
    assert (iface.mac, iface.mtu) == (None, None)


def test_multiqueue_uses_vhost_queues(to_domain: Converter) -> None:
    domain = to_domain(
        {
            "cpu": {"cores": 2},
            "devices": {
                "networkInterfaceMultiqueue": True,
                "interfaces": [{"name": "default", "masquerade": {}}],
            },
        },
        networks=POD,
    )
    driver = domain.devices.interfaces[0].driver
    assert driver is not None
    assert (driver.name, driver.queues) == ("vhost", 2)


def test_a_vmi_without_networking_gets_the_pod_network(to_domain: Converter) -> None:
    (iface,) = to_domain().devices.interfaces
    assert iface.alias is not None
    assert iface.alias.name == "ua-default"


def test_no_interface_when_autoattach_is_off(to_domain: Converter) -> None:
    assert to_domain({"devices": {"autoattachPodInterface": False}}).devices.interfaces == []


def test_link_down_and_absent(to_domain: Converter) -> None:
    domain = to_domain(
        {
            "devices": {
                "interfaces": [
                    {"name": "a", "bridge": {}, "state": "down"},
                    {"name": "b", "bridge": {}, "state": "absent"},
                ]
            }
        },
        networks=[{"name": "a", "pod": {}}, {"name": "b", "pod": {}}],
    )
    (iface,) = domain.devices.interfaces
    assert iface.link is not None
    assert iface.link.state == "down"


@pytest.mark.parametrize(
    ("interfaces", "networks", "field"),
    [
        ([{"name": "other", "bridge": {}}], POD, "spec.domain.devices.interfaces[0].name"),
        ([{"name": "default", "sriov": {}}], POD, "spec.domain.devices.interfaces[0].sriov"),
        (
            [{"name": "blue", "masquerade": {}}],
            [{"name": "blue", "multus": {"networkName": "n"}}],
            "spec.domain.devices.interfaces[0].masquerade",
        ),
        (
            [{"name": "a", "bridge": {}}, {"name": "b", "bridge": {}}],
            [{"name": "a", "pod": {}}, {"name": "b", "pod": {}}],
            "spec.networks[1].pod",
        ),
        (
            [{"name": "a", "bridge": {}}, {"name": "b", "bridge": {}}],
            [
                {"name": "a", "pod": {}},
                {"name": "b", "multus": {"networkName": "n", "default": True}},
            ],
            "spec.networks[1].multus",
        ),
        (
            [{"name": "default", "bridge": {}, "macAddress": "zz"}],
            POD,
            "spec.domain.devices.interfaces[0].macAddress",
        ),
        (
            [{"name": "default", "bridge": {}, "model": "vmxnet3"}],
            POD,
            "spec.domain.devices.interfaces[0].model",
        ),
        (
            [{"name": "default", "bridge": {}}, {"name": "default", "bridge": {}}],
            POD,
            "spec.domain.devices.interfaces[1].name",
        ),
    ],
)
def test_bad_interfaces_are_refused(
    to_domain: Converter,
    interfaces: list[dict[str, Any]],
    networks: list[dict[str, Any]],
    field: str,
) -> None:
    with pytest.raises(ConversionError) as info:
        to_domain({"devices": {"interfaces": interfaces}}, networks=networks)
    assert info.value.field == field


def test_pci_address_and_acpi_index(to_domain: Converter) -> None:
    domain = to_domain(
        {
            "devices": {
                "interfaces": [
                    {
                        "name": "default",
                        "masquerade": {},
                        "pciAddress": "0000:02:03.0",
                        "acpiIndex": 3,
                    }
                ]
            }
        },
        networks=POD,
    )
    (iface,) = domain.devices.interfaces
    assert iface.address is not None
    assert (iface.address.bus, iface.address.slot) == ("0x02", "0x03")
    assert iface.acpi is not None
    assert iface.acpi.index == 3
    assert '<acpi index="3"></acpi>' in domain.to_xml()


def test_multus_bridge_is_a_tap_named_by_the_name_scheme(to_domain: Converter) -> None:
    domain = to_domain(
        {
            "devices": {
                "interfaces": [
                    {"name": "default", "masquerade": {}},
                    {"name": "blue", "bridge": {}, "macAddress": "02:00:00:00:00:0B"},
                    {"name": "red", "bridge": {}, "model": "e1000"},
                ]
            }
        },
        networks=[
            {"name": "default", "pod": {}},
            {"name": "blue", "multus": {"networkName": "blue-net"}},
            {"name": "red", "multus": {"networkName": "other/red-net"}},
        ],
    )
    pod, blue, red = domain.devices.interfaces
    assert [(i.type, i.target.dev if i.target else None) for i in (pod, blue, red)] == [
        ("ethernet", "tap0"),
        ("ethernet", "tap16477688c0e"),
        ("ethernet", "tapb1f51a511f1"),
    ]
    assert blue.target is not None
    assert blue.target.managed == "no"
    assert blue.alias is not None
    assert blue.alias.name == "ua-blue"
    assert blue.mac is not None
    assert blue.mac.address == "02:00:00:00:00:0b"
    assert red.model is not None
    assert red.model.type == "e1000"


def test_the_multus_default_network_takes_tap0(to_domain: Converter) -> None:
    domain = to_domain(
        {
            "devices": {
                "interfaces": [{"name": "blue", "bridge": {}}, {"name": "main", "bridge": {}}]
            }
        },
        networks=[
            {"name": "blue", "multus": {"networkName": "blue-net"}},
            {"name": "main", "multus": {"networkName": "main-net", "default": True}},
        ],
    )
    assert [i.target.dev for i in domain.devices.interfaces if i.target] == [
        "tap16477688c0e",
        "tap0",
    ]
