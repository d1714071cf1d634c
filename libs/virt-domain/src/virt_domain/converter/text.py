"""Find the VMI field behind a string XML cannot carry (control characters).

Any VMI string may reach the domain document (serials, kernel arguments, vendor ids…);
XML 1.0 cannot write most control characters. The formatter refuses them cheaply;
this module names the VMI field for the user, only when that happened.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator, Mapping

from kubevirt_api import VirtualMachineInstance

from ..errors import ConversionError

__all__ = ["UNWRITABLE", "unwritable_field"]

#: Characters outside XML 1.0's ``Char`` production.
UNWRITABLE = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


_FIELDS: dict[type, tuple[tuple[str, str], ...]] = {}


def _fields(cls: type) -> tuple[tuple[str, str], ...]:
    """(attribute, JSON name) of a model class, computed once per class."""
    found = _FIELDS.get(cls)
    if found is None:
        found = tuple(
            (f.name, str(getattr(f.metadata.get("kubevirt_api"), "json", f.name)))
            for f in dataclasses.fields(cls)
            if f.name != "extra"
        )
        _FIELDS[cls] = found
    return found


def _strings(value: object, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield path, value
    elif value is None or isinstance(value, bool | int | float):
        return
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for attribute, json in _fields(type(value)):
            item = getattr(value, attribute)
            if item is not None:
                yield from _strings(item, f"{path}.{json}")
    elif isinstance(value, tuple | list):
        for index, item in enumerate(value):
            yield from _strings(item, f"{path}[{index}]")
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _strings(item, f"{path}[{key}]")


def unwritable_field(vmi: VirtualMachineInstance) -> ConversionError | None:
    """The refusal for the first VMI string XML cannot carry, or None.

    Walks the whole spec, so it runs only after formatting found a bad character.
    """
    for path, text in _strings(vmi.spec, "spec"):
        match = UNWRITABLE.search(text)
        if match is not None:
            return ConversionError(
                path, f"contains the control character {match.group()!r}, which XML cannot carry"
            )
    return None
