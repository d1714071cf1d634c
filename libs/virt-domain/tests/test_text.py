"""Strings XML cannot carry are refused by field, and never written."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from kubevirt_api import VirtualMachineInstance
from virt_domain import ConversionError, Domain, Memory, XmlError, convert_to_xml

Converter = Callable[..., Domain]


def test_control_characters_are_refused_by_field(
    make_vmi: Callable[..., VirtualMachineInstance],
) -> None:
    with pytest.raises(ConversionError) as info:
        convert_to_xml(make_vmi({"firmware": {"serial": "SN\x08"}}))
    assert info.value.field == "spec.domain.firmware.serial"


def test_tabs_and_newlines_are_fine(to_domain: Converter) -> None:
    domain = to_domain(
        {
            "firmware": {
                "kernelBoot": {
                    "kernelArgs": "a\tb",
                    "container": {"image": "k", "kernelPath": "/k"},
                }
            }
        }
    )
    assert domain.os.cmdline == "a\tb"


def test_the_formatter_never_writes_invalid_xml() -> None:
    domain = Domain(name="bad\x01", memory=Memory(unit="b", value=1))
    with pytest.raises(XmlError):
        domain.to_xml()
