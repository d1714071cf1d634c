"""IOThreads: count and assignment."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from virt_domain import ConversionError, Domain

Converter = Callable[..., Domain]


def _disks(*dedicated: bool) -> dict[str, Any]:
    return {
        "devices": {
            "disks": [
                {"name": f"d{i}", "disk": {"bus": "virtio"}, "dedicatedIOThread": d}
                for i, d in enumerate(dedicated)
            ]
        }
    }


def _volumes(count: int) -> list[dict[str, Any]]:
    return [{"name": f"d{i}", "emptyDisk": {"capacity": "1Gi"}} for i in range(count)]


def test_no_iothreads_without_policy_or_dedicated_disks(to_domain: Converter) -> None:
    domain = to_domain(_disks(False, False), volumes=_volumes(2))
    assert domain.iothreads is None
    assert [d.driver.iothread for d in domain.devices.disks if d.driver] == [None, None]


def test_dedicated_threads_follow_the_shared_pool(to_domain: Converter) -> None:
    domain = to_domain(_disks(True, False, True, False), volumes=_volumes(4))
    assert domain.iothreads is not None
    assert domain.iothreads.count == 3
    assert [d.driver.iothread for d in domain.devices.disks if d.driver] == [2, 1, 3, 1]


def test_auto_policy_spreads_over_two_threads_per_vcpu(to_domain: Converter) -> None:
    domain = to_domain(
        {"ioThreadsPolicy": "auto", **_disks(False, False, False)}, volumes=_volumes(3)
    )
    assert domain.iothreads is not None
    assert domain.iothreads.count == 2
    assert [d.driver.iothread for d in domain.devices.disks if d.driver] == [1, 2, 1]


def test_supplemental_pool(to_domain: Converter) -> None:
    domain = to_domain(
        {
            "ioThreadsPolicy": "supplementalPool",
            "ioThreads": {"supplementalPoolThreadCount": 2},
            **_disks(False),
        },
        volumes=_volumes(1),
    )
    assert domain.iothreads is not None
    assert domain.iothreads.count == 2
    assert '<iothread id="2"></iothread>' in domain.to_xml()
    with pytest.raises(ConversionError) as info:
        to_domain({"ioThreadsPolicy": "supplementalPool", **_disks(False)}, volumes=_volumes(1))
    assert info.value.field == "spec.domain.ioThreads.supplementalPoolThreadCount"
