"""status.volumeStatus entries and a migration target's Block claims (pure functions)."""

from __future__ import annotations

from typing import Any

from virt_controller.claims import Claim, block_volumes_in_status, volume_status


def _vmi(**status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "a", "namespace": "ns"},
        "spec": {
            "volumes": [
                {"name": "root", "containerDisk": {"image": "kubevirt-py/guest:devel"}},
                {"name": "data", "persistentVolumeClaim": {"claimName": "data-pvc"}},
                {"name": "scratch", "ephemeral": {"persistentVolumeClaim": {"claimName": "base"}}},
            ]
        },
        "status": status,
    }


def _lookup(namespace: str, name: str) -> Claim | None:
    raw = {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"accessModes": ["ReadWriteMany"], "volumeMode": "Block"},
        "status": {"capacity": {"storage": "1Gi"}},
    }
    return Claim.from_raw(raw) if (namespace, name) == ("ns", "data-pvc") else None


def test_entries_written_by_others_keep_their_fields() -> None:
    vmi = _vmi(volumeStatus=[{"name": "data", "target": "vda", "phase": "Ready"}])
    data, root, scratch = volume_status(vmi, _lookup)
    assert (data["target"], data["phase"]) == ("vda", "Ready")
    assert data["persistentVolumeClaimInfo"] == {
        "claimName": "data-pvc",
        "accessModes": ["ReadWriteMany"],
        "volumeMode": "Block",
        "capacity": {"storage": "1Gi"},
        "filesystemOverhead": "0.055",
    }
    # Upstream reports claim info for persistentVolumeClaim and dataVolume volumes only.
    assert root == {"name": "root", "target": ""}
    assert scratch == {"name": "scratch", "target": ""}


def test_a_migration_target_renders_block_claims_from_the_vmis_status() -> None:
    vmi = _vmi(
        volumeStatus=[
            {"name": "data", "target": "", "persistentVolumeClaimInfo": {"volumeMode": "Block"}},
            {"name": "root", "target": ""},
        ]
    )
    assert block_volumes_in_status(vmi) == frozenset({"data"})
