"""Guest PCI addresses given in the VMI (``pciAddress: 0000:81:01.0``)."""

from __future__ import annotations

import re

from ..devices import Address
from ..errors import ConversionError

__all__ = ["PciAddresses"]

_PCI = re.compile(
    r"^(?P<domain>[0-9a-fA-F]{4}):(?P<bus>[0-9a-fA-F]{2}):(?P<slot>[0-1][0-9a-fA-F])\.(?P<function>[0-7])$"
)


class PciAddresses:
    """Parses addresses and refuses one used twice (two devices cannot share a slot)."""

    def __init__(self) -> None:
        self._used: dict[str, str] = {}

    def claim(self, field: str, text: str) -> Address:
        """The ``<address type='pci'>`` for ``text``; raise if malformed or taken."""
        match = _PCI.match(text)
        if match is None:
            raise ConversionError(
                field, f"{text!r} is not a PCI address; expected DDDD:BB:SS.F, e.g. 0000:81:01.0"
            )
        key = text.lower()
        if key in self._used:
            raise ConversionError(field, f"PCI address {text} is already used by {self._used[key]}")
        self._used[key] = field
        return Address(
            type="pci",
            domain=f"0x{match['domain'].lower()}",
            bus=f"0x{match['bus'].lower()}",
            slot=f"0x{match['slot'].lower()}",
            function=f"0x{match['function']}",
        )
