"""The domain model formats exactly what it parsed, and refuses documents it cannot map."""

from __future__ import annotations

from pathlib import Path

import pytest
from virt_domain import (
    Alias,
    Disk,
    DiskDriver,
    DiskSource,
    DiskTarget,
    Domain,
    Memory,
    SysInfo,
    SysInfoEntry,
    SysInfoSection,
    XmlError,
)

TESTDATA = (
    Path(__file__).resolve().parents[3] / "compat" / "upstream-kubevirt" / "converter-testdata"
)


@pytest.mark.parametrize("name", ["domain_x86_64.xml", "domain_x86_64_root.xml"])
def test_upstream_documents_round_trip_byte_for_byte(name: str) -> None:
    document = (TESTDATA / name).read_text().strip()
    assert Domain.from_xml(document).to_xml() == document


def test_parsed_upstream_document_has_typed_values() -> None:
    domain = Domain.from_xml((TESTDATA / "domain_x86_64.xml").read_bytes())
    assert domain.type == "kvm"
    assert domain.name == "mynamespace_testvmi"
    assert domain.memory == Memory(unit="b", value=8388608)
    assert [d.target.dev for d in domain.devices.disks if d.target] == [
        "vda", "vdb", "sda", "sdb", "sdc", "sdd", "sde", "sdf", "sdg", "sdh", "sdi", "sdj", "sdk",
    ]  # fmt: skip
    assert domain.devices.disks[3].readonly is True
    assert domain.devices.disks[0].readonly is False
    assert domain.iothreads is not None
    assert domain.iothreads.count == 3
    assert domain.metadata is not None
    assert domain.metadata.kubevirt is not None
    assert domain.metadata.kubevirt.uid == ""


def test_built_domain_round_trips() -> None:
    domain = Domain(type="qemu", name="ns_vm", memory=Memory(unit="b", value=1 << 27))
    domain.sysinfo = SysInfo(
        type="smbios",
        system=SysInfoSection(entries=[SysInfoEntry(name="uuid", value='a&b<c>"d"')]),
    )
    domain.devices.disks.append(
        Disk(
            device="disk",
            type="file",
            source=DiskSource(file="/path with 'quotes' & \"more\""),
            target=DiskTarget(bus="virtio", dev="vda"),
            driver=DiskDriver(name="qemu", type="qcow2", iothread=1),
            readonly=True,
            alias=Alias(name="ua-root"),
        )
    )
    document = domain.to_xml()
    again = Domain.from_xml(document)
    assert again == domain
    assert again.to_xml() == document
    assert "<readonly></readonly>" in document


def test_unknown_elements_are_ignored() -> None:
    domain = Domain.from_xml(
        "<domain type='kvm'><name>x</name><memory unit='KiB'>1</memory>"
        "<seclabel type='dynamic'/><devices><hub type='usb'/></devices></domain>"
    )
    assert domain.name == "x"
    assert domain.memory == Memory(unit="KiB", value=1)


@pytest.mark.parametrize(
    ("document", "path"),
    [
        ("<domain><memory unit='b'>lots</memory></domain>", "/domain/memory/text()"),
        ("<domain><vcpu placement='static'>x</vcpu></domain>", "/domain/vcpu/text()"),
        (
            "<domain><devices><disk type='file'/></devices></domain>",
            "/domain/devices/disk[0]/@device",
        ),
        ("<domain><memory>1</memory></domain>", "/domain/memory/@unit"),
        ("<vm/>", "/vm"),
        ("<domain>", "/"),
    ],
)
def test_bad_documents_name_the_path(document: str, path: str) -> None:
    with pytest.raises(XmlError) as info:
        Domain.from_xml(document)
    assert info.value.path == path
