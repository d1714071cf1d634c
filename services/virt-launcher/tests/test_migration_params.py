"""What the source launcher asks libvirt: migrateToURI3's flags, parameters and limits."""

from __future__ import annotations

from typing import Any

import libvirt
import pytest
from virt_domain import Domain
from virt_launcher.migration_source import (
    InvalidMigrationOptionsError,
    MigrationSettings,
    bandwidth_mib,
    completion_limit,
    destination_uri,
    disks_to_copy,
    migration_flags,
    migration_params,
)
from virt_rpc import MigrationOptions

PROXY = "/var/run/kubevirt/migrationproxy"
UID = "0f6c7a4e-mig"
BASE = libvirt.VIR_MIGRATE_LIVE | libvirt.VIR_MIGRATE_PEER2PEER | libvirt.VIR_MIGRATE_PERSIST_DEST


def test_a_plain_migration_is_live_peer_to_peer_and_persistent_on_the_target() -> None:
    assert migration_flags(MigrationSettings(uid=UID), paused=False) == BASE


@pytest.mark.parametrize(
    ("settings", "paused", "extra"),
    [
        ({"block_migration": True}, False, libvirt.VIR_MIGRATE_NON_SHARED_INC),
        ({"unsafe": True}, False, libvirt.VIR_MIGRATE_UNSAFE),
        ({"allow_auto_converge": True}, False, libvirt.VIR_MIGRATE_AUTO_CONVERGE),
        ({"allow_post_copy": True}, False, libvirt.VIR_MIGRATE_POSTCOPY),
        ({}, True, libvirt.VIR_MIGRATE_PAUSED),
        ({"parallel_threads": 8}, False, libvirt.VIR_MIGRATE_PARALLEL),
    ],
)
def test_each_option_adds_its_flag(settings: dict[str, Any], paused: bool, extra: int) -> None:
    assert migration_flags(MigrationSettings(uid=UID, **settings), paused) == BASE | extra


def test_the_streams_go_to_the_proxy_sockets_and_the_target_gets_the_migratable_xml() -> None:
    settings = MigrationSettings(uid=UID, block_migration=True, parallel_threads=8)
    params = migration_params(settings, PROXY, "<domain/>", "ns_vm", ("vda", "vdb"))
    assert params == {
        "migrate_uri": f"unix://{PROXY}/{UID}-49152-source.sock",
        "destination_xml": "<domain/>",
        "persistent_xml": "<domain/>",
        "destination_name": "ns_vm",
        "parallel.connections": 8,
        "migrate_disks": ["vda", "vdb"],
        "disks_uri": f"unix://{PROXY}/{UID}-49153-source.sock",
    }
    assert destination_uri(PROXY, UID) == (f"qemu+unix:///session?socket={PROXY}/{UID}-source.sock")


def test_without_block_migration_no_disk_is_copied_and_no_limit_is_set_by_default() -> None:
    params = migration_params(MigrationSettings(uid=UID), PROXY, "<d/>", "ns_vm", ("vda",))
    assert "migrate_disks" not in params
    assert "disks_uri" not in params
    assert "bandwidth" not in params
    assert "parallel.connections" not in params


@pytest.mark.parametrize(
    ("per_second", "mib"), [(0, 0), (1, 1), (1024 * 1024, 1), (64 * 1024 * 1024 + 1, 65)]
)
def test_bandwidth_is_whole_mib_per_second_and_a_limit_never_becomes_unlimited(
    per_second: int, mib: int
) -> None:
    assert bandwidth_mib(per_second) == mib
    params = migration_params(
        MigrationSettings(uid=UID, bandwidth_bytes_per_second=per_second), PROXY, "", "d", ()
    )
    assert params.get("bandwidth", 0) == mib


@pytest.mark.parametrize(
    ("per_gib", "memory", "disks", "limit"),
    [
        (150, 128 << 20, 0, 150),  # a small guest still counts as 1 GiB
        (150, 1 << 30, 0, 150),
        (150, (1 << 30) + 1, 0, 300),
        (5, 3 << 30, 1 << 30, 20),  # block migration counts the local disks too
        (0, 8 << 30, 0, 0),  # no completion limit
    ],
)
def test_the_completion_limit_is_per_gib_of_data_rounded_up(
    per_gib: int, memory: int, disks: int, limit: int
) -> None:
    assert completion_limit(per_gib, memory, disks) == limit


DOMAIN = """<domain type='qemu'><name>ns_vm</name><memory unit='b'>134217728</memory>
<devices>
  <disk type='file' device='disk'><source file='/e/disk-data/root/disk.qcow2'/>
    <target dev='vda' bus='virtio'/><alias name='ua-root'/></disk>
  <disk type='file' device='disk'><source file='/p/cloud-init/noCloud.iso'/>
    <target dev='vdb' bus='virtio'/><readonly/><alias name='ua-cloudinit'/></disk>
  <disk type='file' device='disk'><source file='/pvc/data/disk.img'/>
    <target dev='vdc' bus='virtio'/><alias name='ua-data'/></disk>
  <disk type='file' device='cdrom'><source file='/p/config.iso'/>
    <target dev='sda' bus='sata'/><readonly/><alias name='ua-config'/></disk>
  <disk type='file' device='disk'><source file='/host/ro.img'/>
    <target dev='vdd' bus='virtio'/><readonly/><alias name='ua-ro'/></disk>
  <disk type='file' device='disk'><source file='/host/shared.img'/>
    <target dev='vde' bus='virtio'/><alias name='ua-shared'/></disk>
</devices></domain>"""
VOLUMES = {
    "spec": {
        "volumes": [
            {"name": "root", "containerDisk": {"image": "x"}},
            {"name": "cloudinit", "cloudInitNoCloud": {"userData": "#cloud-config"}},
            {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
            {"name": "config", "configMap": {"name": "c"}},
            {"name": "ro", "hostDisk": {"path": "/host/ro.img", "type": "Disk"}},
            {"name": "shared", "hostDisk": {"path": "/host/shared.img", "shared": True}},
        ]
    }
}


def test_block_migration_copies_local_disks_but_not_shared_cdrom_or_read_only_ones() -> None:
    # Generated disks (containerDisk overlay, cloud-init even read-only) go along; a PVC,
    # a shared hostDisk, a CD-ROM and a read-only hostDisk stay.
    assert disks_to_copy(Domain.from_xml(DOMAIN), VOLUMES) == ("vda", "vdb")


def test_the_options_must_name_the_migration() -> None:
    with pytest.raises(InvalidMigrationOptionsError) as refused:
        MigrationSettings.from_options(MigrationOptions(migration_uid="../x"))
    assert refused.value.field == "options.migration_uid"
    settings = MigrationSettings.from_options(
        MigrationOptions(
            migration_uid=UID,
            bandwidth_bytes_per_second=5,
            progress_timeout_seconds=7,
            completion_timeout_per_gib=9,
            allow_post_copy=True,
            block_migration=True,
            migrate_disks=["vda"],
            parallel_migration_threads=8,
        )
    )
    assert settings == MigrationSettings(
        uid=UID,
        bandwidth_bytes_per_second=5,
        progress_timeout=7,
        completion_timeout_per_gib=9,
        allow_post_copy=True,
        block_migration=True,
        migrate_disks=("vda",),
        parallel_threads=8,
    )
