"""The converter agrees with upstream KubeVirt's, element by element.

The VMI in ``data/upstream-converter-test-vmi.yaml`` is the one upstream's converter test turns into
``compat/upstream-kubevirt/converter-testdata/domain_x86_64.xml`` (written here as the
manifest a user would apply, with the defaults upstream's webhook adds spelled out).
Both documents are flattened to ``path/@attr=value`` facts; every fact that differs
must be explained by `DELIBERATE_DIFFERENCES`, and every entry there must still explain
something (so the list stays honest).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from kubevirt_api import VirtualMachineInstance, load
from virt_domain import ConverterOptions, Domain, SMBiosInfo, convert

UPSTREAM = (
    Path(__file__).resolve().parents[3]
    / "compat"
    / "upstream-kubevirt"
    / "converter-testdata"
    / "domain_x86_64.xml"
)

#: Every way our domain deliberately differs from upstream's, with the reason.
#: Keys are prefixes of flattened facts (see `_facts`).
DELIBERATE_DIFFERENCES: dict[str, str] = {
    "domain/uuid": "we set <uuid> explicitly to the firmware UUID instead of letting "
    "libvirt copy it from sysinfo",
    "domain/currentMemory": "we state <currentMemory> (equal to <memory>) instead of "
    "leaving it implicit",
    "domain/sysinfo/bios": "empty sysinfo sections are omitted: libvirt's schema refuses them",
    "domain/sysinfo/baseBoard": "empty sysinfo sections are omitted (libvirt's schema)",
    "domain/sysinfo/chassis": "empty sysinfo sections are omitted (libvirt's schema)",
    "domain/devices/interface[ua-default]/target": "the launcher pre-creates the tap and "
    "names it in the domain (managed='no'); upstream fills it in later",
    "domain/devices/disk[ua-ephemeral_pvc]/source/@file": "our overlay lives under "
    "LauncherLayout.ephemeral_dir/disk-data/<volume>/disk.qcow2",
    "domain/devices/disk[ua-nocloud]/source/@file": "cloud-init ISOs live under "
    "LauncherLayout.cloud_init_dir (in the private dir the unprivileged launcher writes)",
    "domain/devices/disk[ua-cdrom_tray_unspecified]/source/@file": "the same cloud-init ISO",
    "domain/metadata/kubevirt/uid": "we record the VMI uid at conversion time; upstream "
    "leaves it empty in the converter and fills it in the launcher",
    "domain/metadata/kubevirt/graceperiod": "the grace period is recorded at conversion "
    "time (upstream adds it later in the launcher)",
}

# The upstream test VMI, as a user would write it (upstream's defaults spelled out).
VMI: dict[str, Any] = yaml.safe_load(
    (Path(__file__).parent / "data" / "upstream-converter-test-vmi.yaml").read_text()
)

#: The converter context upstream's test uses, in our terms.
OPTIONS = ConverterOptions(
    block_volumes=frozenset({"pvc_block_test", "dv_block_test"}),
    smbios=SMBiosInfo(manufacturer="", family="", product=""),  # upstream's test SMBIOS
    memballoon_stats_period=10,
    free_page_reporting=True,
    serial_console_log=True,
)

_KEY_ATTRIBUTES = {"timer": "name", "entry": "name", "controller": "type"}


def _facts(element: ET.Element, path: str) -> Iterator[str]:
    """``path/@attr=value`` / ``path/text()=...`` / ``path`` facts of a document."""
    yield path
    for name, value in sorted(element.attrib.items()):
        yield f"{path}/@{name}={value}"
    text = (element.text or "").strip()
    if text:
        yield f"{path}/text()={text}"
    counts: dict[str, int] = {}
    for child in element:
        tag = child.tag.rsplit("}", 1)[-1]
        alias = child.find("alias")
        if alias is not None:
            key = f"{tag}[{alias.get('name')}]"
        elif tag in _KEY_ATTRIBUTES:
            key = f"{tag}[{child.get(_KEY_ATTRIBUTES[tag])}]"
        else:
            index = counts.get(tag, 0)
            counts[tag] = index + 1
            key = tag if index == 0 else f"{tag}[{index}]"
        yield from _facts(child, f"{path}/{key}")


def _document_facts(document: str) -> set[str]:
    return set(_facts(ET.fromstring(document), "domain"))


def _differences() -> set[str]:
    ours = convert(load(VirtualMachineInstance, VMI), OPTIONS).to_xml()
    theirs = UPSTREAM.read_text()
    return _document_facts(ours) ^ _document_facts(theirs)


def test_every_difference_from_upstream_is_deliberate() -> None:
    unexplained = sorted(
        fact
        for fact in _differences()
        if not any(fact.startswith(prefix) for prefix in DELIBERATE_DIFFERENCES)
    )
    assert unexplained == []


def test_every_listed_difference_still_exists() -> None:
    differences = _differences()
    stale = [
        prefix
        for prefix in DELIBERATE_DIFFERENCES
        if not any(fact.startswith(prefix) for fact in differences)
    ]
    assert stale == []


def test_upstream_devices_are_all_present_with_their_targets() -> None:
    domain = convert(load(VirtualMachineInstance, VMI), OPTIONS)
    upstream = Domain.from_xml(UPSTREAM.read_text())
    ours = [(d.alias.name if d.alias else None, d.target) for d in domain.devices.disks]
    theirs = [(d.alias.name if d.alias else None, d.target) for d in upstream.devices.disks]
    assert ours == theirs
    assert domain.iothreads == upstream.iothreads
    assert domain.features == upstream.features
    assert domain.clock == upstream.clock
