"""Architecture and machine type."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from virt_domain import ConversionError, Domain

Converter = Callable[..., Domain]


def test_q35_x86_64_by_default(to_domain: Converter) -> None:
    domain = to_domain()
    assert (domain.os.type.arch, domain.os.type.machine, domain.os.type.os) == (
        "x86_64",
        "q35",
        "hvm",
    )


def test_versioned_machine_type(to_domain: Converter) -> None:
    assert to_domain({"machine": {"type": "pc-q35-7.2"}}).os.type.machine == "pc-q35-7.2"


@pytest.mark.parametrize(
    ("domain", "spec", "field"),
    [
        ({"machine": {"type": "pc-i440fx-7.2"}}, {}, "spec.domain.machine.type"),
        (None, {"architecture": "s390x"}, "spec.architecture"),
    ],
)
def test_unsupported_machines_are_refused(
    to_domain: Converter, domain: dict[str, object] | None, spec: dict[str, object], field: str
) -> None:
    with pytest.raises(ConversionError) as info:
        to_domain(domain, **spec)
    assert info.value.field == field
