"""`virtctl create instancetype` and `create preference`: upstream's cases
(pkg/virtctl/create/{instancetype,preference}/*_test.go)."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml
from virtctl.validation import validate

from .conftest import Run


def _create(run: Run, kind: str, *argv: str) -> dict[str, Any]:
    result = run("create", kind, *argv)
    assert result.code == 0, result.err
    obj: dict[str, Any] = yaml.safe_load(result.out)
    assert validate(obj) == [], "the manifest must pass `virtctl validate`"
    return obj


def test_a_cluster_instancetype_by_default_with_a_random_name(run: Run) -> None:
    obj = _create(run, "instancetype", "--cpu=2", "--memory=256Mi")
    assert obj["apiVersion"] == "instancetype.kubevirt.io/v1beta1"
    assert obj["kind"] == "VirtualMachineClusterInstancetype"
    assert re.match(
        r"^clusterinstancetype-[bcdfghjklmnpqrstvwxz2456789]{5}$", obj["metadata"]["name"]
    )
    assert obj["spec"] == {"cpu": {"guest": 2}, "memory": {"guest": "256Mi"}}


@pytest.mark.parametrize("argv", [["--namespaced"], ["--namespaced=true"], ["-n", "my-ns"]])
def test_namespaced_instancetype(run: Run, argv: list[str]) -> None:
    obj = _create(run, "instancetype", "--cpu=1", "--memory=1Gi", *argv)
    assert obj["kind"] == "VirtualMachineInstancetype"
    assert obj["metadata"]["name"].startswith("instancetype-")
    if "-n" in argv:
        assert obj["metadata"]["namespace"] == "my-ns"


def test_name_gpus_host_devices_and_iothreads_policy(run: Run) -> None:
    obj = _create(
        run,
        "instancetype",
        "--name=my-instancetype",
        "--cpu=4",
        "--memory=8Gi",
        "--gpu=name:gpu1,devicename:nvidia/gpu1",
        "--gpu=name:gpu2,devicename:nvidia/gpu2",
        "--hostdevice=name:device1,devicename:hostdevice1",
        "--iothreadspolicy=shared",
    )
    assert obj["metadata"] == {"name": "my-instancetype"}
    assert obj["spec"]["gpus"] == [
        {"name": "gpu1", "deviceName": "nvidia/gpu1"},
        {"name": "gpu2", "deviceName": "nvidia/gpu2"},
    ]
    assert obj["spec"]["hostDevices"] == [{"name": "device1", "deviceName": "hostdevice1"}]
    assert obj["spec"]["ioThreadsPolicy"] == "shared"


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--cpu=0", "--memory=1Gi"], "cpu value must be greater than zero"),
        (["--cpu=1", "--memory=lots"], "invalid quantity 'lots'"),
        (
            ["--cpu=1", "--memory=1Gi", "--gpu=devicename:d"],
            'failed to parse "--gpu" flag: name must be specified',
        ),
        (
            ["--cpu=1", "--memory=1Gi", "--gpu=name:g"],
            'failed to parse "--gpu" flag: deviceName must be specified',
        ),
        (
            ["--cpu=1", "--memory=1Gi", "--hostdevice=name:h,vendor:x"],
            'failed to parse "--hostdevice" flag: unknown param(s): vendor:x',
        ),
        (
            ["--cpu=1", "--memory=1Gi", "--iothreadspolicy=sometimes"],
            'failed to parse "--iothreadspolicy" flag: IOThread must be of value auto or shared',
        ),
    ],
)
def test_bad_instancetype_flags(run: Run, argv: list[str], says: str) -> None:
    result = run("create", "instancetype", *argv)
    assert result.code == 1
    assert says in result.err
    assert result.out == ""


@pytest.mark.parametrize("missing", ["--cpu", "--memory"])
def test_cpu_and_memory_are_required(run: Run, missing: str) -> None:
    argv = [a for a in ("--cpu=1", "--memory=1Gi") if not a.startswith(missing)]
    result = run("create", "instancetype", *argv)
    assert result.code == 2
    assert missing in result.err


def test_a_cluster_preference_by_default_with_a_random_name(run: Run) -> None:
    obj = _create(run, "preference")
    assert obj["kind"] == "VirtualMachineClusterPreference"
    assert re.match(
        r"^clusterpreference-[bcdfghjklmnpqrstvwxz2456789]{5}$", obj["metadata"]["name"]
    )
    assert obj["spec"] == {}


@pytest.mark.parametrize(
    "topology", ["sockets", "cores", "threads", "spread", "any", "preferSockets"]
)
def test_preference_flags(run: Run, topology: str) -> None:
    obj = _create(
        run,
        "preference",
        "--namespaced",
        "--name=my-preference",
        f"--cpu-topology={topology}",
        "--volume-storage-class=local",
        "--machine-type=q35",
    )
    assert obj["kind"] == "VirtualMachinePreference"
    assert obj["metadata"] == {"name": "my-preference"}
    assert obj["spec"] == {
        "cpu": {"preferredCPUTopology": topology},
        "machine": {"preferredMachineType": "q35"},
        "volumes": {"preferredStorageClassName": "local"},
    }


def test_a_namespace_makes_a_namespaced_preference(run: Run) -> None:
    obj = _create(run, "preference", "-n", "my-ns")
    assert obj["kind"] == "VirtualMachinePreference"
    assert obj["metadata"]["namespace"] == "my-ns"


def test_a_bad_cpu_topology_names_the_flag_and_the_choices(run: Run) -> None:
    result = run("create", "preference", "--cpu-topology=diagonal")
    assert result.code == 1
    assert 'failed to parse "--cpu-topology" flag' in result.err
    assert "sockets, cores, threads, spread, any" in result.err
