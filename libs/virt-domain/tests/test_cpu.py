"""CPU mode/model, features, topology, vCPUs and dedicated pinning."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from virt_domain import ConversionError, ConverterOptions, Domain

Converter = Callable[..., Domain]


def test_default_is_host_model_one_vcpu(to_domain: Converter) -> None:
    domain = to_domain()
    assert domain.cpu is not None
    assert domain.cpu.mode == "host-model"
    assert domain.cpu.model is None
    assert domain.vcpu is not None
    assert (domain.vcpu.placement, domain.vcpu.count) == ("static", 1)


def test_topology_multiplies_into_vcpus(to_domain: Converter) -> None:
    domain = to_domain({"cpu": {"sockets": 2, "cores": 3, "threads": 2}})
    assert domain.cpu is not None
    assert domain.cpu.topology is not None
    assert (
        domain.cpu.topology.sockets,
        domain.cpu.topology.cores,
        domain.cpu.topology.threads,
    ) == (2, 3, 2)
    assert domain.vcpu is not None
    assert domain.vcpu.count == 12


def test_cpu_request_becomes_sockets_without_topology(to_domain: Converter) -> None:
    domain = to_domain({"resources": {"requests": {"cpu": "1500m"}}})
    assert domain.vcpu is not None
    assert domain.vcpu.count == 2


@pytest.mark.parametrize(
    ("model", "mode", "named"),
    [("host-passthrough", "host-passthrough", None), ("Conroe", "custom", "Conroe")],
)
def test_model_or_mode(to_domain: Converter, model: str, mode: str, named: str | None) -> None:
    domain = to_domain({"cpu": {"model": model}})
    assert domain.cpu is not None
    assert (domain.cpu.mode, domain.cpu.model) == (mode, named)


def test_features_keep_their_policies(to_domain: Converter) -> None:
    domain = to_domain(
        {"cpu": {"features": [{"name": "lahf_lm", "policy": "disable"}, {"name": "vmx"}]}}
    )
    assert domain.cpu is not None
    assert [(f.name, f.policy) for f in domain.cpu.features] == [
        ("lahf_lm", "disable"),
        ("vmx", "require"),
    ]
    assert '<feature name="lahf_lm" policy="disable"></feature>' in domain.to_xml()


def test_unknown_feature_policy_is_refused(to_domain: Converter) -> None:
    with pytest.raises(ConversionError) as info:
        to_domain({"cpu": {"features": [{"name": "x", "policy": "maybe"}]}})
    assert info.value.field == "spec.domain.cpu.features[0].policy"


def test_dedicated_placement_pins_vcpus_to_the_given_cpus(to_domain: Converter) -> None:
    domain = to_domain(
        {"cpu": {"cores": 2, "dedicatedCpuPlacement": True}},
        options=ConverterOptions(dedicated_cpus=(4, 5)),
    )
    assert domain.cputune is not None
    assert [(p.vcpu, p.cpuset) for p in domain.cputune.vcpupins] == [(0, "4"), (1, "5")]
    assert domain.features is not None
    assert domain.features.kvm is not None
    assert domain.features.kvm.hint_dedicated is not None


def test_dedicated_placement_needs_enough_cpus(to_domain: Converter) -> None:
    with pytest.raises(ConversionError) as info:
        to_domain(
            {"cpu": {"cores": 4, "dedicatedCpuPlacement": True}},
            options=ConverterOptions(dedicated_cpus=(1,)),
        )
    assert info.value.field == "spec.domain.cpu.dedicatedCpuPlacement"
