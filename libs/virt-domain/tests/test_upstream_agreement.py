"""The converter agrees with upstream KubeVirt's, element by element.

The VMI below is the one upstream's converter test turns into
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
    "domain/sysinfo/bios": "empty sysinfo sections are omitted: libvirt's schema refuses them",
    "domain/sysinfo/baseBoard": "empty sysinfo sections are omitted (libvirt's schema)",
    "domain/sysinfo/chassis": "empty sysinfo sections are omitted (libvirt's schema)",
    "domain/devices/interface[ua-default]/target": "the launcher pre-creates the tap and "
    "names it in the domain (managed='no'); upstream fills it in later",
    "domain/devices/disk[ua-ephemeral_pvc]/source/@file": "our overlay lives under "
    "LauncherLayout.ephemeral_dir/disk-data/<volume>/disk.qcow2",
    "domain/metadata/kubevirt/uid": "we record the VMI uid at conversion time; upstream "
    "leaves it empty in the converter and fills it in the launcher",
    "domain/metadata/kubevirt/graceperiod": "the grace period is recorded at conversion "
    "time (upstream adds it later in the launcher)",
}

# The upstream test VMI, as YAML would carry it (the comments say where upstream's
# defaults filled a value in).
VMI: dict[str, Any] = {
    "apiVersion": "kubevirt.io/v1",
    "kind": "VirtualMachineInstance",
    "metadata": {
        "name": "testvmi",
        "namespace": "mynamespace",
        "uid": "f4686d2c-6e8d-4335-b8fd-81bee22f4814",
    },
    "spec": {
        "terminationGracePeriodSeconds": 5,
        "domain": {
            "clock": {
                "utc": {},
                "timer": {
                    "hpet": {"present": False, "tickPolicy": "delay"},
                    "kvm": {"present": True},
                    "pit": {"present": False, "tickPolicy": "discard"},
                    "rtc": {"present": True, "tickPolicy": "catchup", "track": "guest"},
                    "hyperv": {"present": True},
                },
            },
            "features": {
                "acpi": {},  # defaulted by upstream's Features{}
                "apic": {},
                "smm": {},
                "kvm": {"hidden": True},
                "pvspinlock": {"enabled": False},
                "hyperv": {
                    "relaxed": {"enabled": False},
                    "vapic": {"enabled": True},
                    "spinlocks": {"enabled": True},
                    "vpindex": {"enabled": True},
                    "runtime": {"enabled": False},
                    "synic": {"enabled": True},
                    "synictimer": {"enabled": True, "direct": {"enabled": True}},
                    "reset": {"enabled": True},
                    "vendorid": {"enabled": False, "vendorid": "myvendor"},
                    "frequencies": {"enabled": False},
                    "reenlightenment": {"enabled": False},
                    "tlbflush": {"enabled": True},
                    "ipi": {"enabled": True},
                    "evmcs": {"enabled": False},
                },
            },
            "firmware": {
                "uuid": "e4686d2c-6e8d-4335-b8fd-81bee22f4814",
                "serial": "e4686d2c-6e8d-4335-b8fd-81bee22f4815",
            },
            "machine": {"type": "q35"},
            "resources": {"requests": {"memory": "8192Ki"}},
            "devices": {
                "disableHotplug": True,
                "rng": {},
                "inputs": [{"bus": "virtio", "type": "tablet", "name": "tablet0"}],
                "interfaces": [{"name": "default", "bridge": {}}],
                "disks": [
                    {"name": "myvolume", "disk": {"bus": "virtio"}, "dedicatedIOThread": True},
                    {"name": "nocloud", "disk": {"bus": "virtio"}, "dedicatedIOThread": True},
                    {
                        "name": "cdrom_tray_unspecified",
                        "cdrom": {"readonly": False},
                        "dedicatedIOThread": False,
                    },
                    {"name": "cdrom_tray_open", "cdrom": {"tray": "open"}},
                    {"name": "should_default_to_disk"},
                    {"name": "ephemeral_pvc", "cache": "none"},
                    {"name": "secret_test", "serial": "D23YZ9W6WA5DJ487"},
                    {"name": "configmap_test", "serial": "CVLY623300HK240D"},
                    {"name": "pvc_block_test", "cache": "writethrough"},
                    {"name": "dv_block_test", "cache": "writethrough"},
                    {"name": "serviceaccount_test"},
                    {"name": "sysprep", "cdrom": {"readonly": False}, "dedicatedIOThread": False},
                    {
                        "name": "sysprep_secret",
                        "cdrom": {"readonly": False},
                        "dedicatedIOThread": False,
                    },
                ],
            },
        },
        "networks": [{"name": "default", "pod": {}}],
        "volumes": [
            {
                "name": "myvolume",
                "hostDisk": {
                    "path": "/var/run/kubevirt-private/vmi-disks/myvolume/disk.img",
                    "type": "DiskOrCreate",
                    "capacity": "1Gi",
                },
            },
            {
                "name": "nocloud",
                "cloudInitNoCloud": {"userDataBase64": "1234", "networkDataBase64": "1234"},
            },
            {
                "name": "cdrom_tray_unspecified",
                "cloudInitNoCloud": {"userDataBase64": "1234", "networkDataBase64": "1234"},
            },
            {
                "name": "cdrom_tray_open",
                "hostDisk": {
                    "path": "/var/run/kubevirt-private/vmi-disks/volume1/disk.img",
                    "type": "DiskOrCreate",
                    "capacity": "1Gi",
                },
            },
            {
                "name": "should_default_to_disk",
                "hostDisk": {
                    "path": "/var/run/kubevirt-private/vmi-disks/volume4/disk.img",
                    "type": "DiskOrCreate",
                    "capacity": "1Gi",
                },
            },
            {
                "name": "ephemeral_pvc",
                "ephemeral": {"persistentVolumeClaim": {"claimName": "testclaim"}},
            },
            {"name": "secret_test", "secret": {"secretName": "testsecret"}},
            {"name": "configmap_test", "configMap": {"name": "testconfig"}},
            {"name": "pvc_block_test", "persistentVolumeClaim": {"claimName": "testblock"}},
            {"name": "dv_block_test", "dataVolume": {"name": "dv_block_test"}},
            {
                "name": "serviceaccount_test",
                "serviceAccount": {"serviceAccountName": "testaccount"},
            },
            {"name": "sysprep", "sysprep": {"configMap": {"name": "testconfig"}}},
            {"name": "sysprep_secret", "sysprep": {"secret": {"name": "testsecret"}}},
        ],
    },
}

#: The converter context upstream's test uses, in our terms.
OPTIONS = ConverterOptions(
    block_volumes=frozenset({"pvc_block_test", "dv_block_test"}),
    smbios=SMBiosInfo(),
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
