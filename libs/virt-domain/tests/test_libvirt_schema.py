"""libvirt itself accepts what the converter writes (its RNG schema, via the test driver)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubevirt_api import VirtualMachineInstance, load
from virt_domain import ConversionError, ConverterOptions, Domain, convert_to_xml

libvirt = pytest.importorskip("libvirt")

EXAMPLES = Path(__file__).resolve().parents[3] / "compat" / "upstream-kubevirt" / "examples"


def _examples() -> Iterator[tuple[str, dict[str, Any]]]:
    for path in sorted(EXAMPLES.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if not isinstance(doc, dict):
                continue
            if doc.get("kind") == "VirtualMachine" and not doc["spec"].get("instancetype"):
                template = doc["spec"]["template"]
                yield (
                    path.name,
                    {
                        "metadata": {"name": doc["metadata"]["name"], "uid": "u"},
                        "spec": template["spec"],
                    },
                )
            elif doc.get("kind") == "VirtualMachineInstance":
                yield path.name, {**doc, "metadata": {**doc["metadata"], "uid": "u"}}


@pytest.fixture(scope="module")
def connection() -> Iterator[Any]:
    conn = libvirt.open("test:///default")
    yield conn
    conn.close()


@pytest.mark.parametrize("emulation", [False, True])
def test_every_converted_example_validates_against_libvirts_schema(
    connection: Any, emulation: bool
) -> None:
    checked = 0
    for name, raw in _examples():
        try:
            xml = convert_to_xml(
                load(VirtualMachineInstance, raw), ConverterOptions(use_emulation=emulation)
            )
        except ConversionError:
            continue
        try:
            domain = connection.defineXMLFlags(xml, libvirt.VIR_DOMAIN_DEFINE_VALIDATE)
        except libvirt.libvirtError as exc:
            pytest.fail(f"{name}: libvirt refused the domain: {exc}")
        domain.undefine()
        checked += 1
    assert checked >= 20


def test_addresses_block_sizes_and_acpi_index_validate(connection: Any) -> None:
    raw = {
        "metadata": {"name": "addr", "uid": "u"},
        "spec": {
            "domain": {
                "memory": {"guest": "64Mi"},
                "devices": {
                    "interfaces": [
                        {
                            "name": "default",
                            "masquerade": {},
                            "pciAddress": "0000:00:05.0",
                            "acpiIndex": 2,
                        }
                    ],
                    "disks": [
                        {
                            "name": "d",
                            "disk": {"bus": "virtio", "pciAddress": "0000:00:06.0"},
                            "blockSize": {"custom": {"logical": 512, "physical": 4096}},
                        },
                        {"name": "s", "disk": {"bus": "scsi"}},
                    ],
                    "watchdog": {"name": "w"},
                    "panicDevices": [{"model": "isa"}],
                    "tpm": {},
                    "sound": {"name": "snd"},
                    "rng": {},
                },
                "firmware": {"bootloader": {"efi": {}}},
                "cpu": {"dedicatedCpuPlacement": True, "cores": 2},
                "ioThreadsPolicy": "auto",
            },
            "networks": [{"name": "default", "pod": {}}],
            "volumes": [
                {"name": "d", "emptyDisk": {"capacity": "1Gi"}},
                {"name": "s", "emptyDisk": {"capacity": "1Gi"}},
            ],
        },
    }
    xml = convert_to_xml(load(VirtualMachineInstance, raw), ConverterOptions(dedicated_cpus=(0, 1)))
    connection.defineXMLFlags(xml, libvirt.VIR_DOMAIN_DEFINE_VALIDATE).undefine()


def test_libvirts_own_description_parses_back(connection: Any) -> None:
    """What libvirt reports (dumpxml) reads into the model with the facts we wrote."""
    raw = yaml.safe_load(
        (Path(__file__).parent / "data" / "upstream-converter-test-vmi.yaml").read_text()
    )
    ours = Domain.from_xml(convert_to_xml(load(VirtualMachineInstance, raw)))
    defined = connection.defineXMLFlags(ours.to_xml(), libvirt.VIR_DOMAIN_DEFINE_VALIDATE)
    try:
        theirs = Domain.from_xml(defined.XMLDesc(0))
    finally:
        defined.undefine()
    assert (theirs.name, theirs.uuid) == (ours.name, ours.uuid)

    def disks(domain: Domain) -> list[tuple[str, str, str]]:
        # libvirt leaves out defaults (a closed tray), so compare alias, bus and name.
        return [
            (d.alias.name if d.alias else "", d.target.bus or "", d.target.dev or "")
            for d in domain.devices.disks
            if d.target is not None
        ]

    assert disks(theirs) == disks(ours)
    assert [i.alias for i in theirs.devices.interfaces] == [
        i.alias for i in ours.devices.interfaces
    ]
    assert theirs.os.type.machine == "q35"
    assert theirs.memory.value * {"KiB": 1024, "b": 1}[theirs.memory.unit] == ours.memory.value
