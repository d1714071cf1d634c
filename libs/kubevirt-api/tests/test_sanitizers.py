"""Upstream's leading-zero address clean-up, at decode time and in the webhook's defaults."""

from __future__ import annotations

from typing import Any

import pytest
from kubevirt_api import VirtualMachineInstance, dump, load
from kubevirt_api.defaults import DefaultsConfig, vm_defaults, vmi_defaults
from kubevirt_api.sanitizers import sanitize_cidr, sanitize_ip, sanitize_vmi_spec


@pytest.mark.parametrize(
    ("given", "clean"),
    [
        ("0127.0.0.3", "127.0.0.3"),
        ("010.000.01.1", "10.0.1.1"),
        ("10.0.0.1", "10.0.0.1"),
        ("FD00::0001", "fd00::1"),
        ("::ffff:1.2.3.4", "1.2.3.4"),
        ("256.0.0.1", None),
        ("1.2.3", None),
        ("ntp.example", None),
        ("", None),
    ],
)
def test_addresses(given: str, clean: str | None) -> None:
    assert sanitize_ip(given) == clean


@pytest.mark.parametrize(
    ("given", "clean"),
    [
        ("10.10.010.0/24", "10.10.10.0/24"),
        ("10.0.2.0/024", "10.0.2.0/24"),
        ("fd10:0:2::/120", "fd10:0:2::/120"),
        ("10.0.2.0/33", None),
        ("10.0.2.0", None),
        ("x/24", None),
    ],
)
def test_cidrs(given: str, clean: str | None) -> None:
    assert sanitize_cidr(given) == clean


def spec() -> dict[str, Any]:
    return {
        "domain": {
            "devices": {
                "interfaces": [
                    {"name": "default", "masquerade": {},
                     "dhcpOptions": {"ntpServers": ["0127.0.0.3", "not-an-ip"]}},
                ]
            }
        },
        "networks": [{"name": "default", "pod": {"vmNetworkCIDR": "10.10.010.0/24"}}],
        "dnsConfig": {"nameservers": ["010.096.0.10"]},
    }  # fmt: skip


def test_the_three_fields_are_cleaned_and_the_input_is_left_alone() -> None:
    given = spec()
    out = sanitize_vmi_spec(given)
    assert out["domain"]["devices"]["interfaces"][0]["dhcpOptions"]["ntpServers"] == [
        "127.0.0.3",
        "not-an-ip",  # not an address: left for validation
    ]
    assert out["networks"][0]["pod"]["vmNetworkCIDR"] == "10.10.10.0/24"
    assert out["dnsConfig"]["nameservers"] == ["10.96.0.10"]
    assert given == spec()


def test_a_clean_spec_is_returned_as_is() -> None:
    clean = sanitize_vmi_spec(spec())
    assert sanitize_vmi_spec(clean) is clean


def test_decoding_a_vmi_cleans_the_typed_values() -> None:
    body = {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
            "metadata": {"name": "v"}, "spec": spec()}  # fmt: skip
    vmi = load(VirtualMachineInstance, body)
    interfaces = vmi.spec.domain.devices.interfaces
    assert interfaces is not None
    assert interfaces[0].dhcp_options is not None
    assert interfaces[0].dhcp_options.ntp_servers == ("127.0.0.3", "not-an-ip")
    assert vmi.spec.networks is not None
    assert vmi.spec.networks[0].pod is not None
    assert vmi.spec.networks[0].pod.vm_network_cidr == "10.10.10.0/24"
    assert dump(vmi)["spec"]["dnsConfig"]["nameservers"] == ["10.96.0.10"]


def test_the_webhooks_defaults_store_the_clean_values() -> None:
    body = {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
            "metadata": {"name": "v"}, "spec": spec()}  # fmt: skip
    out = vmi_defaults(body, DefaultsConfig())
    assert out["spec"]["networks"][0]["pod"]["vmNetworkCIDR"] == "10.10.10.0/24"
    vm = {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "metadata": {"name": "v"},
          "spec": {"template": {"spec": spec()}}}  # fmt: skip
    template = vm_defaults(vm, DefaultsConfig(), create=True)["spec"]["template"]["spec"]
    assert template["dnsConfig"]["nameservers"] == ["10.96.0.10"]
