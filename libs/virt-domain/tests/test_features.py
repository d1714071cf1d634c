"""Hypervisor features."""

from __future__ import annotations

from collections.abc import Callable

from virt_domain import Domain

Converter = Callable[..., Domain]


def test_acpi_on_by_default_and_vmport_off(to_domain: Converter) -> None:
    features = to_domain().features
    assert features is not None
    assert features.acpi is True
    assert features.vmport is not None
    assert features.vmport.state == "off"
    assert (features.apic, features.smm, features.hyperv, features.kvm) == (
        False,
        False,
        None,
        None,
    )


def test_acpi_can_be_disabled(to_domain: Converter) -> None:
    features = to_domain({"features": {"acpi": {"enabled": False}}}).features
    assert features is not None
    assert features.acpi is False


def test_hyperv_kvm_pvspinlock(to_domain: Converter) -> None:
    xml = to_domain(
        {
            "features": {
                "apic": {},
                "hyperv": {
                    "relaxed": {},
                    "spinlocks": {"spinlocks": 8191},
                    "vapic": {"enabled": False},
                    "vendorid": {"vendorid": "kv"},
                },
                "kvm": {"hidden": True},
                "pvspinlock": {"enabled": False},
            }
        }
    ).to_xml()
    for fragment in (
        "<apic></apic>",
        '<relaxed state="on"></relaxed>',
        '<vapic state="off"></vapic>',
        '<spinlocks state="on" retries="8191"></spinlocks>',
        '<vendor_id state="on" value="kv"></vendor_id>',
        '<hidden state="on"></hidden>',
        '<pvspinlock state="off"></pvspinlock>',
    ):
        assert fragment in xml


def test_hyperv_passthrough(to_domain: Converter) -> None:
    features = to_domain({"features": {"hypervPassthrough": {"enabled": True}}}).features
    assert features is not None
    assert features.hyperv is not None
    assert features.hyperv.mode == "passthrough"
