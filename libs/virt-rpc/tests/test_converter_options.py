"""The converter's options cross the wire field for field (virt_rpc.options)."""

from __future__ import annotations

import dataclasses

import pytest
from virt_domain import ConverterOptions, SMBiosInfo
from virt_domain.podnetwork import Binding, DhcpLease, PodNetwork
from virt_rpc import (
    InvalidNetworkError,
    InvalidOptionsError,
    NetworkSetup,
    SyncOptions,
    networks_to_wire,
    options_from_request,
    options_from_wire,
    options_to_wire,
)

#: Options that travel in another field of the request, and which.
ELSEWHERE = {"pod_networks": "SyncVirtualMachineRequest.networks"}
#: Options the launcher finds in its own pod; nobody sends them.
FOUND_BY_THE_LAUNCHER = frozenset({"container_disk_images"})

#: Every field away from its default, so a field the wire drops shows up as a difference.
EVERY_OPTION = ConverterOptions(
    use_emulation=True,
    block_volumes=frozenset({"data", "scratch"}),
    hotplug_volumes=frozenset({"added", "later"}),
    container_disk_formats={"root": "raw", "extra": "qcow2"},
    tap_devices={"default": "tap-x", "second": "tap-y"},
    dedicated_cpus=(4, 5, 7),
    smbios=SMBiosInfo(manufacturer="M", family="F", product="P", sku="S", version="V"),
    memballoon_stats_period=0,
    free_page_reporting=False,
    serial_console_log=False,
    pod_networks=(
        PodNetwork(
            interface="default",
            binding=Binding.MASQUERADE,
            tap="tap0",
            bridge="k6t-eth0",
            mac="02:00:00:0a:0b:0c",
            mtu=1400,
            lease=DhcpLease("10.0.2.1", "10.0.2.2", 24, "10.0.2.1"),
            pod_ips=("10.244.0.9",),
        ),
    ),
)


def over_the_wire(options: ConverterOptions) -> ConverterOptions:
    """What the launcher decodes from a request built from ``options``."""
    message = SyncOptions.parse(bytes(options_to_wire(options)))
    networks = [NetworkSetup.parse(bytes(n)) for n in networks_to_wire(options.pod_networks)]
    return options_from_request(message, networks)


def test_the_sample_sets_every_field_of_the_converter_options() -> None:
    stock = ConverterOptions()
    unchanged = [
        f.name
        for f in dataclasses.fields(ConverterOptions)
        if f.name not in FOUND_BY_THE_LAUNCHER
        and getattr(EVERY_OPTION, f.name) == getattr(stock, f.name)
    ]
    assert unchanged == [], "give the new option a non-default value here and map it in options.py"


def test_every_option_survives_the_wire() -> None:
    assert over_the_wire(EVERY_OPTION) == EVERY_OPTION


def test_pod_networks_are_not_copied_into_sync_options() -> None:
    assert options_from_wire(options_to_wire(EVERY_OPTION)).pod_networks == ()
    assert set(ELSEWHERE) <= {f.name for f in dataclasses.fields(ConverterOptions)}


def test_a_bad_network_is_refused_with_its_field() -> None:
    with pytest.raises(InvalidNetworkError) as caught:
        options_from_request(None, [NetworkSetup(interface="default", binding="slirp")])
    assert caught.value.field == "networks[0].binding"


def test_defaults_survive_the_wire() -> None:
    assert over_the_wire(ConverterOptions()) == ConverterOptions()


def test_no_smbios_is_distinct_from_default_smbios() -> None:
    assert over_the_wire(ConverterOptions(smbios=None)).smbios is None
    assert over_the_wire(ConverterOptions()).smbios == SMBiosInfo()


def test_an_absent_message_or_field_means_the_converter_default() -> None:
    assert options_from_wire(None) == ConverterOptions()
    # An older handler's message: only these two fields were ever set.
    old = options_from_wire(SyncOptions(use_emulation=True, serial_console_log=True))
    assert old == ConverterOptions(use_emulation=True, memballoon_stats_period=0)


def test_an_unknown_disk_format_is_refused_with_its_field() -> None:
    message = SyncOptions(container_disk_formats={"root": "vmdk"})
    with pytest.raises(InvalidOptionsError) as caught:
        options_from_wire(message)
    assert caught.value.field == "options.container_disk_formats[root]"
    assert "raw or qcow2" in caught.value.message
