"""Name, UUID and KubeVirt metadata."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from virt_domain import ConversionError, Domain

Converter = Callable[..., Domain]


def test_domain_is_named_namespace_underscore_name(to_domain: Converter) -> None:
    domain = to_domain()
    assert domain.name == "ns_vm"


def test_uuid_comes_from_firmware(to_domain: Converter) -> None:
    domain = to_domain({"firmware": {"uuid": "E4686D2C-6E8D-4335-B8FD-81BEE22F4814"}})
    assert domain.uuid == "e4686d2c-6e8d-4335-b8fd-81bee22f4814"


def test_uuid_without_firmware_is_stable_per_name(to_domain: Converter) -> None:
    first, second = to_domain(), to_domain()
    other = to_domain(metadata={"name": "other"})
    assert first.uuid == second.uuid
    assert first.uuid != other.uuid


def test_metadata_records_uid_and_grace_period(to_domain: Converter) -> None:
    domain = to_domain(terminationGracePeriodSeconds=7)
    assert domain.metadata is not None
    assert domain.metadata.kubevirt is not None
    assert domain.metadata.kubevirt.uid == "0b5e5a6c-uid"
    assert domain.metadata.kubevirt.grace_period is not None
    assert domain.metadata.kubevirt.grace_period.deletion_grace_period_seconds == 7


@pytest.mark.parametrize(
    ("domain", "metadata", "field"),
    [
        ({"firmware": {"uuid": "not-a-uuid"}}, None, "spec.domain.firmware.uuid"),
        (None, {"uid": None}, "metadata.uid"),
        (None, {"uid": "../escape"}, "metadata.uid"),
        (None, {"name": "a/b"}, "metadata.name"),
    ],
)
def test_bad_identity_is_refused_with_its_field(
    to_domain: Converter,
    domain: dict[str, object] | None,
    metadata: dict[str, object] | None,
    field: str,
) -> None:
    with pytest.raises(ConversionError) as info:
        to_domain(domain, metadata=metadata)
    assert info.value.field == field
