"""The virtio RNG."""

from __future__ import annotations

from collections.abc import Callable

from virt_domain import Domain

Converter = Callable[..., Domain]


def test_rng_reads_urandom(to_domain: Converter) -> None:
    rng = to_domain({"devices": {"rng": {}}}).devices.rng
    assert rng is not None
    assert rng.backend is not None
    assert (rng.model, rng.backend.model, rng.backend.source) == (
        "virtio-non-transitional",
        "random",
        "/dev/urandom",
    )


def test_no_rng_unless_asked(to_domain: Converter) -> None:
    assert to_domain().devices.rng is None


def test_transitional_model_when_asked(to_domain: Converter) -> None:
    rng = to_domain({"devices": {"rng": {}, "useVirtioTransitional": True}}).devices.rng
    assert rng is not None
    assert rng.model == "virtio-transitional"
