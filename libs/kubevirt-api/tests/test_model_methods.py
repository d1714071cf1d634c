"""Models compare, hash and print as the dataclasses they are, though Model writes those
methods once for every generated class."""

from __future__ import annotations

import dataclasses

import pytest
from kubevirt_api import load
from kubevirt_api.models import Disk, DiskTarget, VirtualMachineInstanceSpec


def _disk(**extra: object) -> Disk:
    return load(Disk, {"name": "root", "disk": {"bus": "virtio"}, **extra})


def test_equal_models_are_equal_and_hash_alike() -> None:
    assert _disk() == _disk()
    assert hash(_disk()) == hash(_disk())
    assert _disk() != load(Disk, {"name": "data", "disk": {"bus": "virtio"}})
    assert {_disk(), _disk()} == {_disk()}


def test_unknown_fields_count_for_equality_but_not_for_the_hash() -> None:
    # As the dataclass field says: extra has compare on, hash off.
    with_extra = _disk(futureField=1)
    assert with_extra.extra == {"futureField": 1}
    assert with_extra != _disk()
    assert hash(with_extra) == hash(_disk())


def test_models_of_different_classes_are_never_equal() -> None:
    assert _disk() != _disk().disk
    assert _disk().__eq__(DiskTarget()) is NotImplemented


def test_repr_is_the_dataclass_one_without_extra() -> None:
    text = repr(_disk(futureField=1))
    assert text.startswith("Disk(")
    assert "name='root'" in text
    assert "disk=DiskTarget(" in text
    assert "futureField" not in text


def test_replace_and_frozenness_still_hold() -> None:
    changed = dataclasses.replace(_disk(), name="data")
    assert changed.name == "data"
    assert changed != _disk()
    with pytest.raises(dataclasses.FrozenInstanceError):
        changed.name = "x"  # type: ignore[misc]
    spec = load(VirtualMachineInstanceSpec, {"domain": {"devices": {}}})
    assert spec == load(VirtualMachineInstanceSpec, {"domain": {"devices": {}}})
