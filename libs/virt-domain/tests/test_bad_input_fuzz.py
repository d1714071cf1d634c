"""Whatever a VMI holds, the converter answers with a domain or a ConversionError.

Hypothesis mutates one field of upstream's all-features VMI at a time (nulls, empty
strings, path tricks, huge or negative numbers, wrong shapes). A mutant the typed
loader refuses is out of scope here; every mutant it accepts must convert or be
refused by field path, never crash.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kubevirt_api import InvalidObjectError, VirtualMachineInstance, load
from virt_domain import ConversionError, ConverterOptions, Domain, cloud_init_media, convert_to_xml

BASE: dict[str, Any] = yaml.safe_load(
    (Path(__file__).parent / "data" / "upstream-converter-test-vmi.yaml").read_text()
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _paths(value, (*prefix, index))


PATHS = [p for p in _paths(BASE) if p]
VALUES = st.one_of(
    st.sampled_from(
        [
            None,
            "",
            "..",
            "../x",
            "/a/../b",
            "a/b",
            "ide",
            "virtio",
            "0",
            -1,
            0,
            1,
            2**40,
            {},
            [],
            True,
        ]
    ),
    st.text(max_size=12),
    st.integers(min_value=-(2**33), max_value=2**33),
)


def _mutate(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    raw = copy.deepcopy(BASE)
    node: Any = raw
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return raw


def _outcome(vmi: VirtualMachineInstance, emulation: bool) -> str:
    """ "converted" (and the XML round-trips) or "refused" (with a field path)."""
    try:
        xml = convert_to_xml(vmi, ConverterOptions(use_emulation=emulation))
    except ConversionError as exc:
        refusal = exc
    else:
        assert Domain.from_xml(xml).to_xml() == xml
        return "converted"
    assert refusal.field
    assert refusal.message
    return "refused"


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(path=st.sampled_from(PATHS), value=VALUES, emulation=st.booleans())
def test_mutants_convert_or_are_refused_by_field(
    path: tuple[Any, ...], value: Any, emulation: bool
) -> None:
    try:
        vmi = load(VirtualMachineInstance, _mutate(path, value))
    except InvalidObjectError:
        return
    assert _outcome(vmi, emulation) in ("converted", "refused")
    try:
        cloud_init_media(vmi)
    except ConversionError as exc:
        refusal = exc
    else:
        return
    assert refusal.field
