"""A sync of the running domain attaches and detaches its hotplugged disks; every status
then names the domain's disks with their targets, on the wire too."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterator
from typing import Any, cast

import libvirt
import pytest
from kubevirt_api import VirtualMachineInstance, load
from virt_domain import ConverterOptions, LauncherLayout, convert_to_xml
from virt_launcher.cmd_server import to_domain
from virt_launcher.domain_manager import DomainManager
from virt_launcher.errors import LibvirtError
from virt_launcher.executor import BlockingExecutor
from virt_launcher.guest import Guest
from virt_launcher.host import Host
from virt_launcher.states import DomainChange, DomainReason, DomainState, DomainStatus, GuestDisk

LAYOUT = LauncherLayout()
NAME = "ns_vm"


def _vmi(*hotplugged: str) -> dict[str, Any]:
    names = ["root", *hotplugged]
    return {
        "metadata": {"name": "vm", "namespace": "ns", "uid": "u"},
        "spec": {
            "domain": {
                "memory": {"guest": "64Mi"},
                "devices": {
                    "disks": [{"name": "root", "disk": {"bus": "virtio"}}]
                    + [{"name": n} for n in hotplugged]
                },
            },
            "volumes": [{"name": "root", "containerDisk": {"image": "quay.io/x:1"}}]
            + [
                {"name": n, "persistentVolumeClaim": {"claimName": n, "hotpluggable": True}}
                for n in names[1:]
            ],
        },
    }


def _xml(present: set[str], *hotplugged: str) -> str:
    vmi = load(VirtualMachineInstance, _vmi(*hotplugged))
    return convert_to_xml(vmi, ConverterOptions(hotplug_volumes=frozenset(present)))


class FakeGuest:
    """The running domain: its live XML changes as disks are attached and detached."""

    name = NAME
    uuid = "uuid-1"

    def __init__(self, live_xml: str, fail: LibvirtError | None = None) -> None:
        self.live = ET.fromstring(live_xml)
        self.calls: list[tuple[str, str]] = []
        self.fail = fail

    async def is_active(self) -> bool:
        return True

    async def status(self) -> DomainStatus:
        return DomainStatus(NAME, self.uuid, DomainState.RUNNING, DomainReason.BOOTED)

    async def xml(self) -> str:
        return ET.tostring(self.live, encoding="unicode")

    async def attach_disk(self, disk_xml: str) -> None:
        self.calls.append(("attach", disk_xml))
        if self.fail is not None:
            raise self.fail
        devices = self.live.find("devices")
        assert devices is not None
        devices.append(ET.fromstring(disk_xml))

    async def detach_disk(self, disk_xml: str) -> None:
        self.calls.append(("detach", disk_xml))
        devices = self.live.find("devices")
        assert devices is not None
        dev = ET.fromstring(disk_xml).find("target")
        assert dev is not None
        for disk in devices.findall("disk"):
            target = disk.find("target")
            if target is not None and target.get("dev") == dev.get("dev"):
                devices.remove(disk)


class FakeHost:
    def __init__(self, guest: FakeGuest) -> None:
        self.guest = guest

    async def lookup(self, name: str) -> FakeGuest | None:
        return self.guest if name == NAME else None


def _manager(guest: FakeGuest) -> DomainManager:
    return DomainManager(cast(Host, FakeHost(guest)), NAME)


def _alias(disk_xml: str) -> str | None:
    alias = ET.fromstring(disk_xml).find("alias")
    return None if alias is None else alias.get("name")


async def test_a_mounted_volume_is_attached_and_reported_with_its_target() -> None:
    guest = FakeGuest(_xml(set(), "data"))
    manager = _manager(guest)
    changes = manager.subscribe()

    status = await manager.sync(_xml({"data"}, "data"))

    [(verb, disk_xml)] = guest.calls
    assert (verb, _alias(disk_xml)) == ("attach", "ua-data")
    source = ET.fromstring(disk_xml).find("source")
    assert source is not None
    assert source.get("file") == LAYOUT.hotplug_disk_image("data")
    assert status.disks == (GuestDisk("root", "vda"), GuestDisk("data", "sda"))
    # Notify's watchers hear of it too.
    change = changes.get_nowait()
    assert isinstance(change, DomainChange)
    assert change.status.disks == status.disks
    wire = to_domain(status)
    assert [(d.name, d.target) for d in wire.disks] == [("root", "vda"), ("data", "sda")]


async def test_a_volume_gone_from_the_vmi_is_detached() -> None:
    guest = FakeGuest(_xml({"data", "logs"}, "data", "logs"))
    manager = _manager(guest)

    status = await manager.sync(_xml({"logs"}, "logs"))

    assert [(verb, _alias(x)) for verb, x in guest.calls] == [("detach", "ua-data")]
    assert [d.name for d in status.disks] == ["root", "logs"]


async def test_nothing_is_touched_when_the_disks_agree() -> None:
    guest = FakeGuest(_xml({"data"}, "data"))
    manager = _manager(guest)
    changes = manager.subscribe()

    status = await manager.sync(_xml({"data"}, "data"))

    assert guest.calls == []
    assert changes.empty()
    assert [d.name for d in status.disks] == ["root", "data"]


async def test_a_refused_attach_is_raised_and_the_live_disks_still_reported() -> None:
    guest = FakeGuest(_xml(set(), "data"), fail=LibvirtError("no such file", 38))
    manager = _manager(guest)

    with pytest.raises(LibvirtError, match="no such file"):
        await manager.sync(_xml({"data"}, "data"))

    status = await manager.status()
    assert status is not None
    assert status.disks == (GuestDisk("root", "vda"),)


class FakeDom:
    """libvirt's virDomain as Guest calls it."""

    def __init__(self, persistent: bool) -> None:
        self.persistent = persistent
        self.calls: list[tuple[str, str, int]] = []

    def name(self) -> str:
        return NAME

    def UUIDString(self) -> str:  # noqa: N802 - libvirt's name
        return "uuid-1"

    def isPersistent(self) -> int:  # noqa: N802
        return int(self.persistent)

    def attachDeviceFlags(self, xml: str, flags: int) -> int:  # noqa: N802
        self.calls.append(("attach", xml, flags))
        return 0

    def detachDeviceFlags(self, xml: str, flags: int) -> int:  # noqa: N802
        self.calls.append(("detach", xml, flags))
        return 0


@pytest.fixture
def executor() -> Iterator[BlockingExecutor]:
    pool = BlockingExecutor(max_workers=1)
    yield pool
    pool.shutdown()


@pytest.mark.parametrize(
    ("persistent", "flags"),
    [
        (True, libvirt.VIR_DOMAIN_AFFECT_LIVE | libvirt.VIR_DOMAIN_AFFECT_CONFIG),
        (False, libvirt.VIR_DOMAIN_AFFECT_LIVE),
    ],
)
async def test_the_guest_changes_the_live_domain_and_a_definition_if_it_has_one(
    executor: BlockingExecutor, persistent: bool, flags: int
) -> None:
    dom = FakeDom(persistent)
    guest = Guest(dom, executor)
    await guest.attach_disk("<disk/>")
    await guest.detach_disk("<disk/>")
    assert dom.calls == [("attach", "<disk/>", flags), ("detach", "<disk/>", flags)]


async def test_the_guest_raises_the_facades_errors(executor: BlockingExecutor) -> None:
    class Refusing(FakeDom):
        def attachDeviceFlags(self, xml: str, flags: int) -> int:  # noqa: N802
            raise libvirt.libvirtError("target sda already exists")

    with pytest.raises(LibvirtError):
        await Guest(Refusing(True), executor).attach_disk("<disk/>")
