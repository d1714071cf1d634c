"""The common instancetypes and preferences: upstream's names and values, all admissible,
and the committed manifests are what the table generates."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubevirt_api import common_instancetypes, validate_object
from kubevirt_api.admission import ClusterConfig
from kubevirt_api.admission import validate_object as admission_problems
from kubevirt_api.common_instancetypes import cluster_instancetypes, cluster_preferences

ROOT = Path(__file__).resolve().parents[3]
DIRECTORY = ROOT / "manifests" / "common-instancetypes"
CLASS = "instancetype.kubevirt.io/class"


def _by_name(objects: list[dict[str, Any]]) -> dict[str, Any]:
    return {o["metadata"]["name"]: o for o in objects}


def test_each_series_has_upstreams_number_of_sizes() -> None:
    series = Counter(o["metadata"]["name"].split(".")[0] for o in cluster_instancetypes())
    assert series == {"u1": 10, "o1": 9, "cx1": 12, "m1": 10, "n1": 6, "rt1": 8, "d1": 10}
    assert len(cluster_preferences()) == 54


def test_u1_small_is_one_vcpu_and_2gi() -> None:
    small = _by_name(cluster_instancetypes())["u1.small"]
    assert small["spec"] == {"cpu": {"guest": 1}, "memory": {"guest": "2Gi"}}
    labels = small["metadata"]["labels"]
    assert labels[CLASS] == "general.purpose"
    assert labels["instancetype.kubevirt.io/cpu"] == "1"
    assert labels["instancetype.kubevirt.io/memory"] == "2Gi"
    assert (
        small["metadata"]["annotations"]["instancetype.kubevirt.io/displayName"]
        == "General Purpose"
    )


@pytest.mark.parametrize(
    ("name", "spec"),
    [
        (
            "cx1.large1gi",
            {
                "cpu": {
                    "dedicatedCPUPlacement": True,
                    "guest": 2,
                    "isolateEmulatorThread": True,
                    "maxSockets": 2,
                    "numa": {"guestMappingPassthrough": {}},
                },
                "ioThreadsPolicy": "auto",
                "memory": {"guest": "4Gi", "hugepages": {"pageSize": "1Gi"}},
            },
        ),
        ("o1.nano", {"cpu": {"guest": 1}, "memory": {"guest": "512Mi", "overcommitPercent": 50}}),
        (
            "m1.large",
            {"cpu": {"guest": 2}, "memory": {"guest": "16Gi", "hugepages": {"pageSize": "2Mi"}}},
        ),
    ],
)
def test_series_specs_carry_upstreams_values(name: str, spec: dict[str, object]) -> None:
    assert _by_name(cluster_instancetypes())[name]["spec"] == spec


def test_labels_restate_the_spec_of_every_instancetype() -> None:
    for obj in cluster_instancetypes():
        labels, spec = obj["metadata"]["labels"], obj["spec"]
        assert labels["instancetype.kubevirt.io/cpu"] == str(spec["cpu"]["guest"])
        assert labels["instancetype.kubevirt.io/memory"] == spec["memory"]["guest"]
        assert labels["instancetype.kubevirt.io/size"] == obj["metadata"]["name"].split(".", 1)[1]


def test_os_preferences_fill_upstreams_devices_and_requirements() -> None:
    prefs = _by_name(cluster_preferences())
    assert {"fedora", "centos.stream9", "centos.stream10", "rhel.9", "ubuntu", "debian"} <= set(
        prefs
    )
    assert {"cirros", "alpine", "linux", "windows.11", "windows.2k22.virtio"} <= set(prefs)
    fedora = prefs["fedora"]["spec"]
    assert fedora["firmware"] == {"preferredEfi": {"secureBoot": True}}
    assert fedora["requirements"] == {
        "architecture": "amd64",
        "cpu": {"guest": 1},
        "memory": {"guest": "2Gi"},
    }
    windows = prefs["windows.11"]["spec"]
    assert windows["devices"]["preferredTPM"] == {"persistent": True}
    assert windows["preferredTerminationGracePeriodSeconds"] == 3600
    assert prefs["windows.2k8"]["spec"]["devices"]["preferredInterfaceModel"] == "e1000"
    assert prefs["windows.2k8.virtio"]["spec"]["devices"]["preferredInterfaceModel"] == "virtio"


def test_every_object_passes_schema_and_admission() -> None:
    for obj in cluster_instancetypes() + cluster_preferences():
        name = obj["metadata"]["name"]
        assert list(validate_object(obj)) == [], name
        assert admission_problems(obj, ClusterConfig()) == [], name


def test_a_fresh_call_returns_fresh_objects() -> None:
    first = cluster_instancetypes()
    first[0]["spec"]["cpu"]["guest"] = 99
    assert cluster_instancetypes()[0]["spec"]["cpu"]["guest"] != 99


def test_committed_manifests_are_fresh_and_hold_the_table() -> None:
    assert common_instancetypes.stale_files(DIRECTORY) == [], (
        "manifests/common-instancetypes is stale: run "
        "`uv run python -m kubevirt_api.common_instancetypes` and commit"
    )
    docs = [
        d for f in sorted(DIRECTORY.glob("*.yaml")) for d in yaml.safe_load_all(f.read_text()) if d
    ]
    assert docs == cluster_instancetypes() + cluster_preferences()


def test_a_table_change_without_regeneration_is_caught(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert common_instancetypes.main(["--output", str(tmp_path)]) == 0
    (tmp_path / "virtualmachineclusterpreferences.yaml").write_text("---\n")
    assert common_instancetypes.main(["--check", "--output", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "virtualmachineclusterpreferences.yaml" in err
    assert "uv run python -m kubevirt_api.common_instancetypes" in err
