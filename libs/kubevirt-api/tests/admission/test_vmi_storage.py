"""VMI create: disks, volumes, boot order, containerDisk/hostDisk paths, cloud-init."""

from __future__ import annotations

import base64
from typing import Any

from kubevirt_api.admission import ClusterConfig, validate_vmi_create


def fields(vmi: dict[str, Any], config: ClusterConfig | None = None) -> dict[str, str]:
    got: dict[str, str] = {}
    for c in validate_vmi_create(vmi, config or ClusterConfig()):
        got[c.field] = f"{got.get(c.field, '')} {c.message}".strip()
    return got


def test_valid_vmi_is_admitted(vmi: dict[str, Any]) -> None:
    assert validate_vmi_create(vmi, ClusterConfig()) == []


def test_disk_without_volume_names_the_disk(vmi: dict[str, Any]) -> None:
    vmi["spec"]["domain"]["devices"]["disks"].append({"name": "data", "disk": {}})
    got = fields(vmi)
    assert "spec.domain.devices.disks[1].name" in got
    assert "add a volume" in got["spec.domain.devices.disks[1].name"]


def test_volume_without_disk_is_refused(vmi: dict[str, Any]) -> None:
    vmi["spec"]["volumes"].append({"name": "extra", "emptyDisk": {"capacity": "1Gi"}})
    assert "spec.volumes[1].name" in fields(vmi)


def test_duplicate_disk_names(vmi: dict[str, Any]) -> None:
    vmi["spec"]["domain"]["devices"]["disks"].append({"name": "root", "disk": {}})
    assert "must be unique" in fields(vmi)["spec.domain.devices.disks[1].name"]


def test_more_than_one_target_type(vmi: dict[str, Any]) -> None:
    vmi["spec"]["domain"]["devices"]["disks"][0]["cdrom"] = {}
    assert "only one of disk, lun or cdrom" in fields(vmi)["spec.domain.devices.disks[0]"]


def test_virtio_cdrom_is_refused_with_valid_buses(vmi: dict[str, Any]) -> None:
    vmi["spec"]["domain"]["devices"]["disks"][0] = {"name": "root", "cdrom": {"bus": "virtio"}}
    assert "sata, scsi" in fields(vmi)["spec.domain.devices.disks[0].cdrom.bus"]


def test_ide_bus_is_refused(vmi: dict[str, Any]) -> None:
    vmi["spec"]["domain"]["devices"]["disks"][0]["disk"]["bus"] = "ide"
    assert "spec.domain.devices.disks[0].disk.bus" in fields(vmi)


def test_boot_orders_positive_and_unique(vmi: dict[str, Any]) -> None:
    devices = vmi["spec"]["domain"]["devices"]
    devices["disks"][0]["bootOrder"] = 1
    devices["interfaces"][0]["bootOrder"] = 1
    devices["disks"].append({"name": "d2", "disk": {}, "bootOrder": 0})
    vmi["spec"]["volumes"].append({"name": "d2", "emptyDisk": {"capacity": "1Gi"}})
    got = fields(vmi)
    assert (
        "already used by spec.domain.devices.disks[0].bootOrder"
        in got["spec.domain.devices.interfaces[0].bootOrder"]
    )
    assert "greater than 0" in got["spec.domain.devices.disks[1].bootOrder"]


def test_container_disk_path_must_not_climb(vmi: dict[str, Any]) -> None:
    vmi["spec"]["volumes"][0]["containerDisk"]["path"] = "/disk/../etc/shadow"
    assert "'..'" in fields(vmi)["spec.volumes[0].containerDisk.path"]


def test_host_disk_needs_gate_type_and_capacity(vmi: dict[str, Any]) -> None:
    vmi["spec"]["volumes"][0] = {
        "name": "root",
        "hostDisk": {"path": "relative", "type": "DiskOrCreate"},
    }
    got = fields(vmi)
    assert "HostDisk feature gate" in got["spec.volumes[0].hostDisk"]
    assert "absolute" in got["spec.volumes[0].hostDisk.path"]
    assert "capacity" in got["spec.volumes[0].hostDisk.capacity"]
    gated = fields(vmi, ClusterConfig(feature_gates=frozenset({"HostDisk"})))
    assert "spec.volumes[0].hostDisk" not in gated


def test_cloud_init_one_source_size_and_base64(vmi: dict[str, Any]) -> None:
    vmi["spec"]["domain"]["devices"]["disks"].append({"name": "ci", "disk": {}})
    vmi["spec"]["volumes"].append(
        {
            "name": "ci",
            "cloudInitNoCloud": {"userData": "x" * 2049, "userDataBase64": "!!notbase64"},
        }
    )
    got = fields(vmi)
    assert "only one user-data source" in got["spec.volumes[1].cloudInitNoCloud"]
    assert "2048 bytes" in got["spec.volumes[1].cloudInitNoCloud.userData"]
    assert "base64" in got["spec.volumes[1].cloudInitNoCloud.userDataBase64"]


def test_cloud_init_base64_within_limit_is_fine(vmi: dict[str, Any]) -> None:
    vmi["spec"]["domain"]["devices"]["disks"].append({"name": "ci", "disk": {}})
    encoded = base64.b64encode(b"#cloud-config\n").decode()
    vmi["spec"]["volumes"].append({"name": "ci", "cloudInitNoCloud": {"userDataBase64": encoded}})
    assert validate_vmi_create(vmi, ClusterConfig()) == []


def test_several_problems_reported_together(vmi: dict[str, Any]) -> None:
    vmi["spec"]["domain"]["devices"]["disks"][0]["disk"]["bus"] = "ide"
    vmi["spec"]["hostname"] = "Not_A_Label"
    vmi["spec"]["domain"]["resources"]["requests"]["memory"] = "1Gx"
    assert len(validate_vmi_create(vmi, ClusterConfig())) >= 3


def test_container_disk_path_must_not_be_root(vmi: dict[str, Any]) -> None:
    vmi["spec"]["volumes"][0]["containerDisk"]["path"] = "/"
    assert "root" in fields(vmi)["spec.volumes[0].containerDisk.path"]


def test_a_pvc_volume_is_admitted_and_a_data_volume_refused_naming_cdi(
    vmi: dict[str, Any],
) -> None:
    vmi["spec"]["domain"]["devices"]["disks"].append({"name": "data", "disk": {}})
    vmi["spec"]["volumes"].append({"name": "data", "persistentVolumeClaim": {"claimName": "c"}})
    assert fields(vmi) == {}
    vmi["spec"]["volumes"][1] = {"name": "data", "dataVolume": {"name": "dv"}}
    got = fields(vmi)
    assert list(got) == ["spec.volumes[1].dataVolume"]
    assert "CDI" in got["spec.volumes[1].dataVolume"]
    assert "no DataVolume CRD" in got["spec.volumes[1].dataVolume"]
