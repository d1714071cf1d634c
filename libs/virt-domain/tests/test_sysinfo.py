"""SMBIOS sysinfo: UUID, serial, cluster strings, chassis."""

from __future__ import annotations

from collections.abc import Callable

from virt_domain import ConverterOptions, Domain, SMBiosInfo

Converter = Callable[..., Domain]


def _system(domain: Domain) -> dict[str, str]:
    assert domain.sysinfo is not None
    assert domain.sysinfo.system is not None
    return {e.name: e.value for e in domain.sysinfo.system.entries}


def test_uuid_and_serial(to_domain: Converter) -> None:
    domain = to_domain(
        {"firmware": {"uuid": "e4686d2c-6e8d-4335-b8fd-81bee22f4814", "serial": "S-1"}}
    )
    system = _system(domain)
    assert system["uuid"] == "e4686d2c-6e8d-4335-b8fd-81bee22f4814"
    assert system["serial"] == "S-1"
    assert domain.os.smbios is not None
    assert domain.os.smbios.mode == "sysinfo"


def test_kubevirt_smbios_defaults(to_domain: Converter) -> None:
    system = _system(to_domain())
    assert (system["manufacturer"], system["family"], system["product"]) == (
        "KubeVirt",
        "KubeVirt",
        "None",
    )


def test_cluster_smbios_strings(to_domain: Converter) -> None:
    domain = to_domain(
        options=ConverterOptions(smbios=SMBiosInfo(manufacturer="KubeVirt", product="None"))
    )
    assert _system(domain)["manufacturer"] == "KubeVirt"
    assert _system(domain)["product"] == "None"


def test_chassis(to_domain: Converter) -> None:
    domain = to_domain({"chassis": {"asset": "A-7", "sku": "k"}})
    assert domain.sysinfo is not None
    assert domain.sysinfo.chassis is not None
    assert {e.name: e.value for e in domain.sysinfo.chassis.entries}["asset"] == "A-7"
