"""The VM and VMI series read from the caches at scrape time carry upstream's names,
labels and values, and go with the object."""

from __future__ import annotations

from typing import Any

from service_kit import MetricsRegistry
from virt_controller.vmstats import (
    CacheCollector,
    launcher_overhead,
    vm_samples,
    vmi_info_labels,
    vmi_samples,
)

VM: dict[str, Any] = {
    "metadata": {"name": "vm1", "namespace": "ns", "creationTimestamp": "2026-01-01T00:00:00Z"},
    "spec": {
        "template": {
            "spec": {
                "domain": {
                    "cpu": {"cores": 2},
                    "memory": {"guest": "1Gi"},
                    "resources": {"requests": {"memory": "1Gi"}, "limits": {"cpu": "1500m"}},
                    "devices": {"interfaces": [{"name": "default", "masquerade": {}}]},
                },
                "networks": [{"name": "default", "pod": {}}],
            }
        }
    },
    "status": {
        "printableStatus": "Running",
        "conditions": [
            {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:01:40Z"}
        ],
    },
}


def _by_name(samples: list[Any]) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.metric, tuple(sorted(s.labels.items()))): s.value for s in samples}


def _value(samples: list[Any], metric: str, **labels: str) -> float | None:
    for s in samples:
        if s.metric == metric and all(s.labels.get(k) == v for k, v in labels.items()):
            return float(s.value)
    return None


def test_a_vms_requests_limits_and_effective_resources() -> None:
    samples = vm_samples(VM)
    requests = "kubevirt_vm_resource_requests"
    assert _value(samples, requests, resource="memory", source="domain") == 1024**3
    assert _value(samples, requests, resource="memory", source="guest") == 1024**3
    assert _value(samples, requests, resource="cpu", unit="cores", source="domain") == 2
    assert _value(samples, requests, resource="cpu", unit="cores", source="guest_effective") == 2
    assert _value(samples, "kubevirt_vm_resource_limits", resource="cpu", unit="cores") == 1.5
    assert _value(samples, "kubevirt_vm_resource_limits", resource="memory") is None


def test_only_the_current_status_groups_transition_time_is_set() -> None:
    samples = vm_samples(VM)
    stamp = 1767225600.0 + 100
    running = "kubevirt_vm_running_status_last_transition_timestamp_seconds"
    assert _value(samples, running, name="vm1", namespace="ns") == stamp
    error = "kubevirt_vm_error_status_last_transition_timestamp_seconds"
    assert _value(samples, error, name="vm1") == 0.0
    assert _value(samples, "kubevirt_vm_create_date_timestamp_seconds") == 1767225600.0


def test_a_vm_without_cpu_requests_reports_upstreams_defaults() -> None:
    vm = {"metadata": {"name": "v", "namespace": "ns"}, "spec": {"template": {"spec": {}}}}
    samples = vm_samples(vm)
    for part in ("cores", "threads", "sockets"):
        assert _value(samples, "kubevirt_vm_resource_requests", unit=part, source="default") == 1


def test_a_running_vmis_addresses_vnics_and_migration_times() -> None:
    vmi = {
        "metadata": {"name": "vm1", "namespace": "ns"},
        "spec": VM["spec"]["template"]["spec"],
        "status": {
            "phase": "Running",
            "nodeName": "node-1",
            "interfaces": [{"name": "default", "ipAddress": "10.1.0.5"}],
            "migrationState": {
                "migrationUid": "m1",
                "startTimestamp": "2026-01-01T00:00:00Z",
                "endTimestamp": "2026-01-01T00:00:10Z",
            },
        },
    }
    samples = vmi_samples(vmi)
    assert _value(samples, "kubevirt_vmi_status_addresses", address="10.1.0.5", node="node-1")
    vnic = _value(
        samples, "kubevirt_vmi_vnic_info", binding_type="masquerade", network="pod networking"
    )
    assert vnic == 1
    end = _value(samples, "kubevirt_vmi_migration_end_time_seconds", status="succeeded")
    assert end == 1767225610.0


def test_the_collector_follows_the_caches_at_each_scrape() -> None:
    registry = MetricsRegistry()
    vms = [VM]
    outdated = {"metadata": {"name": "o", "labels": {"kubevirt.io/outdatedLauncherImage": ""}}}
    collector = CacheCollector(registry, lambda: vms, lambda: [outdated])
    registry.add_collector(collector.collect)

    body = registry.render()[0].decode()
    assert 'kubevirt_vm_create_date_timestamp_seconds{name="vm1",namespace="ns"}' in body
    assert "kubevirt_vmi_number_of_outdated 1" in body
    assert "# TYPE kubevirt_vm_running_status_last_transition_timestamp_seconds counter" in body
    vms.clear()
    assert 'name="vm1"' not in registry.render()[0].decode()


def test_the_launcher_overhead_is_the_recorded_one_else_computed() -> None:
    registry = MetricsRegistry()
    recorded = {
        "metadata": {"name": "a", "namespace": "ns"},
        "status": {"memory": {"memoryOverhead": "200Mi"}},
    }
    computed = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstance",
        "metadata": {"name": "b", "namespace": "ns"},
        "spec": {"domain": {"devices": {}, "resources": {"requests": {"memory": "128Mi"}}}},
    }
    collector = CacheCollector(
        registry, list, lambda: [recorded, computed], launcher_overhead(lambda: None)
    )
    collector.collect()
    gauge = registry.gauge("kubevirt_vmi_launcher_memory_overhead_bytes", "")
    assert gauge.value({"namespace": "ns", "name": "a"}) == 200 * 1024**2
    assert gauge.value({"namespace": "ns", "name": "b"}) > 100 * 1024**2


def test_vmi_info_carries_upstreams_labels() -> None:
    vmi = {
        "metadata": {
            "name": "vm1",
            "namespace": "ns",
            "annotations": {
                "vm.kubevirt.io/os": "fedora",
                "kubevirt.io/cluster-instancetype-name": "u1.small",
            },
            "labels": {"kubevirt.io/outdatedLauncherImage": ""},
        },
        "status": {
            "guestOSInfo": {"name": "Fedora Linux", "versionId": "39", "machine": "x86_64"},
            "machine": {"type": "q35"},
        },
    }
    labels = vmi_info_labels(vmi, evictable=False)
    assert labels["os"] == "fedora"
    assert labels["instance_type"] == "u1.small"
    assert (labels["guest_os_name"], labels["guest_os_version_id"]) == ("Fedora Linux", "39")
    assert (labels["guest_os_arch"], labels["guest_os_machine"]) == ("x86_64", "q35")
    assert (labels["evictable"], labels["outdated"]) == ("false", "true")
    assert labels["workload"] == ""
