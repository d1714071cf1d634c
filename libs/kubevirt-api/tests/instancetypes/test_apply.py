"""Instancetype rules: what an instancetype provides, and the fields that conflict."""

from __future__ import annotations

from typing import Any

import pytest
from kubevirt_api.instancetypes import (
    apply_to_vmi_spec,
    check_spread_topology,
    conflicts_message,
    guest_topology,
)

BASE = "spec.template.spec"


def _itype(**extra: Any) -> dict[str, Any]:
    return {"cpu": {"guest": 2}, "memory": {"guest": "128Mi"}, **extra}


def test_cpu_and_memory_are_provided_with_the_default_sockets_topology() -> None:
    applied = apply_to_vmi_spec(BASE, _itype(), None, {"domain": {}})
    assert applied.conflicts == ()
    assert applied.spec["domain"]["cpu"] == {"sockets": 2, "cores": 1, "threads": 1}
    assert applied.spec["domain"]["memory"] == {"guest": "128Mi"}


def test_the_input_is_never_changed() -> None:
    spec: dict[str, Any] = {"domain": {}}
    itype = _itype(nodeSelector={"a": "b"})
    apply_to_vmi_spec(BASE, itype, None, spec)
    assert spec == {"domain": {}}
    assert itype["nodeSelector"] == {"a": "b"}


@pytest.mark.parametrize(
    ("preference", "vcpus", "expected"),
    [
        (None, 1, (1, 1, 1)),
        ({"cpu": {"preferredCPUTopology": "cores"}}, 4, (1, 4, 1)),
        ({"cpu": {"preferredCPUTopology": "threads"}}, 4, (1, 1, 4)),
        ({"cpu": {"preferredCPUTopology": "preferCores"}}, 4, (1, 4, 1)),
        ({"cpu": {"preferredCPUTopology": "any"}}, 4, (4, 1, 1)),
        ({"cpu": {"preferredCPUTopology": "spread"}}, 4, (2, 2, 1)),
        (
            {"cpu": {"preferredCPUTopology": "spread"}, "preferSpreadSocketToCoreRatio": 3},
            6,
            (2, 3, 1),
        ),
        (
            {
                "cpu": {
                    "preferredCPUTopology": "spread",
                    "spreadOptions": {"across": "CoresThreads"},
                }
            },
            4,
            (1, 2, 2),
        ),
        (
            {
                "cpu": {
                    "preferredCPUTopology": "spread",
                    "spreadOptions": {"across": "SocketsCoresThreads", "ratio": 2},
                }
            },
            8,
            (2, 2, 2),
        ),
    ],
)
def test_the_preferred_topology_shapes_the_vcpus(
    preference: dict[str, Any] | None, vcpus: int, expected: tuple[int, int, int]
) -> None:
    topology = guest_topology(vcpus, preference)
    assert (topology["sockets"], topology["cores"], topology["threads"]) == expected


def test_cpu_extras_are_copied() -> None:
    itype = _itype(
        cpu={
            "guest": 2,
            "model": "host-passthrough",
            "dedicatedCPUPlacement": True,
            "isolateEmulatorThread": True,
            "numa": {"guestMappingPassthrough": {}},
            "realtime": {},
            "maxSockets": 8,
        }
    )
    cpu = apply_to_vmi_spec(BASE, itype, None, {"domain": {}}).spec["domain"]["cpu"]
    assert cpu == {
        "model": "host-passthrough",
        "dedicatedCpuPlacement": True,
        "isolateEmulatorThread": True,
        "numa": {"guestMappingPassthrough": {}},
        "realtime": {},
        "maxSockets": 8,
        "sockets": 2,
        "cores": 1,
        "threads": 1,
    }


@pytest.mark.parametrize(
    ("domain", "path"),
    [
        ({"cpu": {"sockets": 1}}, "domain.cpu.sockets"),
        ({"cpu": {"cores": 1}}, "domain.cpu.cores"),
        ({"cpu": {"threads": 1}}, "domain.cpu.threads"),
        ({"resources": {"requests": {"cpu": "1"}}}, "domain.resources.requests.cpu"),
        ({"resources": {"limits": {"cpu": "1"}}}, "domain.resources.limits.cpu"),
        ({"memory": {"guest": "1Gi"}}, "domain.memory.guest"),
        ({"resources": {"requests": {"memory": "1Gi"}}}, "domain.resources.requests.memory"),
        ({"resources": {"limits": {"memory": "1Gi"}}}, "domain.resources.limits.memory"),
    ],
)
def test_a_vm_setting_what_the_instancetype_provides_conflicts(
    domain: dict[str, Any], path: str
) -> None:
    applied = apply_to_vmi_spec(BASE, _itype(), None, {"domain": domain})
    assert [c.path for c in applied.conflicts] == [f"{BASE}.{path}"]
    assert applied.conflicts[0].message == (
        f"VM field(s) {BASE}.{path} conflicts with selected instance type"
    )


@pytest.mark.parametrize(
    ("itype_extra", "spec", "path"),
    [
        (
            {"cpu": {"guest": 1, "model": "a"}},
            {"domain": {"cpu": {"model": "b"}}},
            "domain.cpu.model",
        ),
        (
            {"cpu": {"guest": 1, "dedicatedCPUPlacement": True}},
            {"domain": {"cpu": {"dedicatedCpuPlacement": True}}},
            "domain.cpu.dedicatedCpuPlacement",
        ),
        (
            {"memory": {"guest": "1Gi", "hugepages": {"pageSize": "2Mi"}}},
            {"domain": {"memory": {"hugepages": {"pageSize": "1Gi"}}}},
            "domain.memory.hugepages",
        ),
        (
            {"memory": {"guest": "1Gi", "maxGuest": "4Gi"}},
            {"domain": {"memory": {"maxGuest": "2Gi"}}},
            "domain.memory.maxGuest",
        ),
        ({"nodeSelector": {"a": "b"}}, {"domain": {}, "nodeSelector": {}}, "nodeSelector"),
        ({"schedulerName": "s"}, {"domain": {}, "schedulerName": "t"}, "schedulerName"),
        (
            {"ioThreadsPolicy": "auto"},
            {"domain": {"ioThreadsPolicy": "shared"}},
            "domain.ioThreadsPolicy",
        ),
        (
            {"ioThreads": {"supplementalPoolThreadCount": 2}},
            {"domain": {"ioThreads": {"supplementalPoolThreadCount": 1}}},
            "domain.ioThreads.supplementalPoolThreadCount",
        ),
        (
            {"launchSecurity": {"sev": {}}},
            {"domain": {"launchSecurity": {}}},
            "domain.launchSecurity",
        ),
        (
            {"gpus": [{"name": "g", "deviceName": "d"}]},
            {"domain": {"devices": {"gpus": [{"name": "x", "deviceName": "y"}]}}},
            "domain.devices.gpus",
        ),
        (
            {"hostDevices": [{"name": "h", "deviceName": "d"}]},
            {"domain": {"devices": {"hostDevices": [{"name": "x", "deviceName": "y"}]}}},
            "domain.devices.hostDevices",
        ),
    ],
)
def test_optional_fields_conflict_only_when_both_set(
    itype_extra: dict[str, Any], spec: dict[str, Any], path: str
) -> None:
    itype = _itype(**itype_extra)
    applied = apply_to_vmi_spec(BASE, itype, None, spec)
    assert [c.path for c in applied.conflicts] == [f"{BASE}.{path}"]


def test_the_vm_may_set_what_the_instancetype_leaves_out() -> None:
    spec = {"domain": {"cpu": {"model": "host-model"}, "ioThreadsPolicy": "shared"}}
    applied = apply_to_vmi_spec(BASE, _itype(), None, spec)
    assert applied.conflicts == ()
    assert applied.spec["domain"]["cpu"]["model"] == "host-model"


def test_several_conflicts_are_all_named() -> None:
    spec = {"domain": {"cpu": {"sockets": 2, "cores": 2}, "memory": {"guest": "1Gi"}}}
    conflicts = apply_to_vmi_spec(BASE, _itype(), None, spec).conflicts
    assert conflicts_message(conflicts) == (
        f"VM field(s) {BASE}.domain.cpu.sockets, {BASE}.domain.cpu.cores, "
        f"{BASE}.domain.memory.guest conflicts with selected instance type"
    )


def test_memory_overcommit_lowers_the_request_as_upstream_float32() -> None:
    itype = _itype(memory={"guest": "2Gi", "overcommitPercent": 10})
    domain = apply_to_vmi_spec(BASE, itype, None, {"domain": {}}).spec["domain"]
    assert domain["memory"]["guest"] == "2Gi"
    assert domain["resources"]["requests"]["memory"] == "1932735232"


def test_hugepages_max_guest_io_threads_devices_and_scheduling_are_provided() -> None:
    itype = _itype(
        memory={"guest": "1Gi", "hugepages": {"pageSize": "2Mi"}, "maxGuest": "4Gi"},
        ioThreadsPolicy="auto",
        ioThreads={"supplementalPoolThreadCount": 4},
        launchSecurity={"sev": {}},
        gpus=[{"name": "gpu1", "deviceName": "nvidia.com/GP102GL"}],
        hostDevices=[{"name": "hd1", "deviceName": "vendor.com/dev"}],
        nodeSelector={"node": "a"},
        schedulerName="custom",
    )
    spec = apply_to_vmi_spec(BASE, itype, None, {"domain": {}}).spec
    domain = spec["domain"]
    assert domain["memory"] == {"guest": "1Gi", "hugepages": {"pageSize": "2Mi"}, "maxGuest": "4Gi"}
    assert domain["ioThreadsPolicy"] == "auto"
    assert domain["ioThreads"] == {"supplementalPoolThreadCount": 4}
    assert domain["launchSecurity"] == {"sev": {}}
    assert domain["devices"]["gpus"] == itype["gpus"]
    assert domain["devices"]["hostDevices"] == itype["hostDevices"]
    assert spec["nodeSelector"] == {"node": "a"}
    assert spec["schedulerName"] == "custom"


def test_instancetype_annotations_fill_absent_keys_and_conflict_on_different_values() -> None:
    itype = _itype(annotations={"a": "1", "b": "2"})
    applied = apply_to_vmi_spec(BASE, itype, None, {"domain": {}}, {"b": "2", "c": "3"})
    assert applied.annotations == {"a": "1", "b": "2", "c": "3"}
    clash = apply_to_vmi_spec(BASE, itype, None, {"domain": {}}, {"a": "other"})
    assert [c.path for c in clash.conflicts] == ["annotations.a"]


def test_a_conflict_skips_the_preference() -> None:
    preference = {"preferredTerminationGracePeriodSeconds": 5}
    applied = apply_to_vmi_spec(
        BASE, _itype(), preference, {"domain": {"memory": {"guest": "1Gi"}}}
    )
    assert applied.conflicts
    assert "terminationGracePeriodSeconds" not in applied.spec


@pytest.mark.parametrize(
    ("guest", "cpu", "ratio_key", "fragment"),
    [
        (
            3,
            {"preferredCPUTopology": "spread"},
            None,
            "3 vCPUs provided by the instance type are not divisible by the Spec.PreferSpreadSocketToCoreRatio",
        ),
        (
            3,
            {"preferredCPUTopology": "spread", "spreadOptions": {"across": "CoresThreads"}},
            None,
            "not divisible by the number of threads per core 2",
        ),
        (
            6,
            {"preferredCPUTopology": "spread", "spreadOptions": {"across": "SocketsCoresThreads"}},
            None,
            "threads per core 2 and Spec.PreferSpreadSocketToCoreRatio or Spec.CPU.PreferSpreadOptions.Ratio of 2",
        ),
    ],
)
def test_a_spread_topology_must_divide_the_vcpus(
    guest: int, cpu: dict[str, Any], ratio_key: str | None, fragment: str
) -> None:
    conflict = check_spread_topology({"cpu": {"guest": guest}}, {"cpu": cpu})
    assert conflict is not None
    assert conflict.path == "instancetype.spec.cpu.guest"
    assert fragment in conflict.message


def test_a_dividing_spread_topology_is_fine() -> None:
    assert (
        check_spread_topology({"cpu": {"guest": 4}}, {"cpu": {"preferredCPUTopology": "spread"}})
        is None
    )
    assert check_spread_topology({"cpu": {"guest": 3}}, None) is None
