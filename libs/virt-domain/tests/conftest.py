"""Helpers shared by the converter tests: build VMIs from plain manifests."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from kubevirt_api import VirtualMachineInstance, load
from virt_domain import ConverterOptions, Domain, LauncherLayout, convert

VmiFactory = Callable[..., VirtualMachineInstance]
Converter = Callable[..., Domain]

BASE: dict[str, Any] = {
    "apiVersion": "kubevirt.io/v1",
    "kind": "VirtualMachineInstance",
    "metadata": {"name": "vm", "namespace": "ns", "uid": "0b5e5a6c-uid"},
    "spec": {"domain": {"devices": {}, "memory": {"guest": "128Mi"}}},
}


def _merge(into: dict[str, Any], patch: dict[str, Any]) -> None:
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


def build_vmi(
    domain: dict[str, Any] | None = None,
    *,
    metadata: dict[str, Any] | None = None,
    status: dict[str, Any] | None = None,
    **spec: Any,
) -> VirtualMachineInstance:
    """A VMI from ``BASE`` with ``spec.domain`` and ``spec`` merged in (dicts merge)."""
    raw = copy.deepcopy(BASE)
    if domain:
        _merge(raw["spec"]["domain"], domain)
    _merge(raw["spec"], spec)
    if metadata:
        _merge(raw["metadata"], metadata)
    if status:
        raw["status"] = copy.deepcopy(status)
    return load(VirtualMachineInstance, raw)


@pytest.fixture
def make_vmi() -> VmiFactory:
    """``make_vmi(domain_patch, metadata=..., **spec_patch)``."""
    return build_vmi


@pytest.fixture
def to_domain() -> Converter:
    """``to_domain(domain_patch, options=..., layout=..., **spec_patch)`` -> Domain."""

    def run(
        domain: dict[str, Any] | None = None,
        *,
        options: ConverterOptions | None = None,
        layout: LauncherLayout | None = None,
        metadata: dict[str, Any] | None = None,
        status: dict[str, Any] | None = None,
        **spec: Any,
    ) -> Domain:
        vmi = build_vmi(domain, metadata=metadata, status=status, **spec)
        return convert(vmi, options, layout)

    return run
