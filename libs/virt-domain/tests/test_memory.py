"""Guest memory and hugepages backing."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from virt_domain import ConversionError, Domain

Converter = Callable[..., Domain]


def test_guest_memory_in_bytes(to_domain: Converter) -> None:
    domain = to_domain()
    assert (domain.memory.unit, domain.memory.value) == ("b", 128 * 1024 * 1024)
    assert domain.current_memory == domain.memory
    assert domain.memory_backing is None


def test_memory_from_requests_when_guest_is_unset(to_domain: Converter) -> None:
    domain = to_domain({"memory": None, "resources": {"requests": {"memory": "64Mi"}}})
    assert domain.memory.value == 64 * 1024 * 1024


def test_hugepages_back_the_memory(to_domain: Converter) -> None:
    domain = to_domain({"memory": {"guest": "1Gi", "hugepages": {"pageSize": "2Mi"}}})
    assert domain.memory_backing is not None
    assert domain.memory_backing.hugepages is not None
    assert [(p.size, p.unit) for p in domain.memory_backing.hugepages.pages] == [("2048", "KiB")]


@pytest.mark.parametrize(
    ("domain", "field"),
    [
        ({"memory": None}, "spec.domain.memory.guest"),
        (
            {"memory": {"guest": "1Gi", "hugepages": {"pageSize": "3Mi"}}},
            "spec.domain.memory.hugepages.pageSize",
        ),
        (
            {"memory": {"guest": "3Mi", "hugepages": {"pageSize": "2Mi"}}},
            "spec.domain.memory.guest",
        ),
        ({"memory": {"guest": "1Gi", "maxGuest": "2Gi"}}, "spec.domain.memory.maxGuest"),
        ({"memory": {"guest": "0"}}, "spec.domain.memory.guest"),
    ],
)
def test_bad_memory_names_the_field(
    to_domain: Converter, domain: dict[str, object], field: str
) -> None:
    with pytest.raises(ConversionError) as info:
        to_domain(domain)
    assert info.value.field == field
