"""LiveMigratable and status.migrationMethod, as upstream's calculateLiveMigrationCondition."""

from __future__ import annotations

from typing import Any

from virt_handler.migratability import migratability


def _vmi(
    *volumes: dict[str, Any], disks: list[dict[str, Any]] | None = None, **status: Any
) -> dict[str, Any]:
    return {
        "spec": {
            "domain": {
                "devices": {
                    "disks": disks or [],
                    "interfaces": [{"name": "default", "masquerade": {}}],
                }
            },
            "networks": [{"name": "default", "pod": {}}],
            "volumes": list(volumes),
        },
        "status": status,
    }


def test_no_disks_is_a_live_migration() -> None:
    verdict = migratability(_vmi())
    assert (verdict.reason, verdict.method) == ("", "LiveMigration")


def test_local_disks_make_it_a_block_migration() -> None:
    for volume in (
        {"name": "root", "containerDisk": {"image": "x"}},
        {"name": "ci", "cloudInitNoCloud": {"userData": "#cloud-config"}},
        {"name": "scratch", "emptyDisk": {"capacity": "1Gi"}},
    ):
        verdict = migratability(_vmi(volume))
        assert (verdict.reason, verdict.method) == ("", "BlockMigration"), volume


def test_a_read_only_cdrom_is_not_copied() -> None:
    cdrom = {"name": "ci", "cdrom": {"bus": "sata"}}
    verdict = migratability(_vmi({"name": "ci", "cloudInitNoCloud": {}}, disks=[cdrom]))
    assert verdict.method == "LiveMigration"
    writable = {"name": "ci", "cdrom": {"bus": "sata", "readonly": False}}
    assert migratability(
        _vmi({"name": "ci", "cloudInitNoCloud": {}}, disks=[writable])
    ).block_migration


def test_a_pvc_must_be_known_and_shared() -> None:
    pvc = {"name": "data", "persistentVolumeClaim": {"claimName": "claim-a"}}
    unknown = migratability(_vmi(pvc))
    assert unknown.reason == "DisksNotLiveMigratable"
    assert "Unable to determine if PVC claim-a is shared" in unknown.message
    rwo = {"name": "data", "persistentVolumeClaimInfo": {"accessModes": ["ReadWriteOnce"]}}
    not_shared = migratability(_vmi(pvc, volumeStatus=[rwo]))
    assert "PVC claim-a is not shared" in not_shared.message
    rwx = {"name": "data", "persistentVolumeClaimInfo": {"accessModes": ["ReadWriteMany"]}}
    shared = migratability(_vmi(pvc, volumeStatus=[rwx]))
    assert (shared.reason, shared.method) == ("", "LiveMigration")


def test_a_host_disk_must_be_shared() -> None:
    disk = {"name": "h", "hostDisk": {"path": "/d.img", "type": "DiskOrCreate"}}
    assert migratability(_vmi(disk)).message == "cannot migrate VMI with non-shared HostDisk"
    disk["hostDisk"]["shared"] = True
    assert migratability(_vmi(disk)).reason == ""


def test_the_interface_reason_comes_before_the_disks() -> None:
    vmi = _vmi({"name": "data", "persistentVolumeClaim": {"claimName": "c"}})
    vmi["spec"]["domain"]["devices"]["interfaces"] = [{"name": "default", "bridge": {}}]
    assert migratability(vmi).reason == "InterfaceNotLiveMigratable"


def test_host_devices_and_passthrough_are_refused() -> None:
    vmi = _vmi()
    vmi["spec"]["domain"]["devices"]["hostDevices"] = [{"name": "d", "deviceName": "x/y"}]
    assert migratability(vmi).reason == "HostDeviceNotLiveMigratable"
    vmi = _vmi()
    vmi["spec"]["domain"]["features"] = {"hypervPassthrough": {"enabled": True}}
    assert migratability(vmi).reason == "HypervPassthroughNotLiveMigratable"
