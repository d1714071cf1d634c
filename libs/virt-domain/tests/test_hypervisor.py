"""Domain type: kvm unless the options ask for emulation."""

from __future__ import annotations

from collections.abc import Callable

from virt_domain import ConverterOptions, Domain

Converter = Callable[..., Domain]


def test_kvm_by_default(to_domain: Converter) -> None:
    assert to_domain().type == "kvm"


def test_qemu_when_emulating(to_domain: Converter) -> None:
    assert to_domain(options=ConverterOptions(use_emulation=True)).type == "qemu"


def test_emulation_shows_in_the_xml(to_domain: Converter) -> None:
    xml = to_domain(options=ConverterOptions(use_emulation=True)).to_xml()
    assert xml.startswith('<domain type="qemu"')
