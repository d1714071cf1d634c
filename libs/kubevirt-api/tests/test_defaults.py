"""Defaulting follows upstream's create-time rules and yields a JSON patch for webhooks."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubevirt_api import VirtualMachine, VirtualMachineInstance, load
from kubevirt_api.defaults import (
    VMI_FINALIZER,
    DefaultingError,
    DefaultsConfig,
    admitted_vmi,
    autoattach_graphics,
    autoattach_serial_console,
    default_vm,
    default_vmi,
    disk_target_names,
    json_patch,
    vm_defaults,
    vmi_defaults,
)

EXAMPLES = Path(__file__).resolve().parents[3] / "compat" / "upstream-kubevirt" / "examples"
CONFIG = DefaultsConfig()


def _uuid() -> str:
    return "00000000-0000-0000-0000-000000000001"


def _vmi(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "domain": {"devices": {}, "resources": {"requests": {"memory": "128Mi"}}}
    }
    base.update(spec)
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstance",
        "metadata": {"name": "t"},
        "spec": base,
    }


def _defaulted(vmi: dict[str, Any], config: DefaultsConfig = CONFIG) -> dict[str, Any]:
    return vmi_defaults(vmi, config, new_uuid=_uuid)


def test_machine_cpu_topology_and_guest_memory() -> None:
    out = _defaulted(_vmi())
    domain = out["spec"]["domain"]
    assert domain["machine"] == {"type": "q35"}
    assert domain["cpu"] == {"sockets": 1, "cores": 1, "threads": 1, "model": "host-model"}
    assert domain["memory"] == {"guest": "128Mi"}
    assert domain["firmware"] == {"uuid": _uuid()}
    assert out["spec"]["architecture"] == "amd64"
    assert out["status"]["memory"] == {
        "guestAtBoot": "128Mi",
        "guestCurrent": "128Mi",
        "guestRequested": "128Mi",
    }
    assert out["status"]["currentCPUTopology"] == {"sockets": 1, "cores": 1, "threads": 1}


def test_given_values_are_kept() -> None:
    vmi = _vmi()
    domain = vmi["spec"]["domain"]
    domain.update(
        machine={"type": "pc-q35-7.2"},
        cpu={"cores": 4, "model": "Haswell"},
        memory={"guest": "1Gi"},
    )
    out = _defaulted(vmi)["spec"]["domain"]
    assert out["machine"] == {"type": "pc-q35-7.2"}
    assert out["cpu"] == {"cores": 4, "model": "Haswell"}
    assert out["memory"] == {"guest": "1Gi"}


def test_sockets_follow_the_cpu_limit_and_guest_memory_the_limit() -> None:
    vmi = _vmi()
    vmi["spec"]["domain"]["resources"] = {"limits": {"cpu": "2500m", "memory": "2Gi"}}
    out = _defaulted(vmi)["spec"]["domain"]
    assert out["cpu"]["sockets"] == 3
    assert out["resources"]["requests"] == {"cpu": "2500m"}
    assert out["memory"]["guest"] == "2Gi"


def test_configured_cpu_request_is_written_unless_dedicated() -> None:
    config = DefaultsConfig(cpu_request="250m")
    assert _defaulted(_vmi(), config)["spec"]["domain"]["resources"]["requests"]["cpu"] == "250m"
    vmi = _vmi()
    vmi["spec"]["domain"]["cpu"] = {"dedicatedCpuPlacement": True}
    assert "cpu" not in _defaulted(vmi, config)["spec"]["domain"]["resources"]["requests"]
    assert (
        "cpu"
        not in _defaulted(_vmi(), DefaultsConfig(cpu_request="100m"))["spec"]["domain"][
            "resources"
        ]["requests"]
    )


def test_pod_network_with_masquerade_when_nothing_is_given() -> None:
    out = _defaulted(_vmi())["spec"]
    assert out["networks"] == [{"name": "default", "pod": {}}]
    assert out["domain"]["devices"]["interfaces"] == [{"name": "default", "masquerade": {}}]


def test_no_pod_network_when_autoattach_is_false_or_interfaces_exist() -> None:
    vmi = _vmi()
    vmi["spec"]["domain"]["devices"]["autoattachPodInterface"] = False
    assert "networks" not in _defaulted(vmi)["spec"]
    vmi = _vmi(networks=[{"name": "n", "multus": {"networkName": "x"}}])
    vmi["spec"]["domain"]["devices"]["interfaces"] = [{"name": "n", "bridge": {}}]
    out = _defaulted(vmi)["spec"]
    assert out["networks"] == [{"name": "n", "multus": {"networkName": "x"}}]


def test_bridge_default_and_its_permission() -> None:
    out = _defaulted(_vmi(), DefaultsConfig(network_interface="bridge"))
    assert out["spec"]["domain"]["devices"]["interfaces"] == [{"name": "default", "bridge": {}}]
    with pytest.raises(DefaultingError, match="bridge"):
        _defaulted(
            _vmi(),
            DefaultsConfig(
                network_interface="bridge", permit_bridge_interface_on_pod_network=False
            ),
        )


def test_disks_buses_and_volume_disks() -> None:
    vmi = _vmi(
        volumes=[
            {"name": "root", "containerDisk": {"image": "quay.io/x/cirros:v1"}},
            {"name": "iso", "containerDisk": {"image": "iso"}},
            {"name": "data", "emptyDisk": {"capacity": "1Gi"}},
        ]
    )
    vmi["spec"]["domain"]["devices"]["disks"] = [
        {"name": "root", "disk": {"bus": "virtio"}},
        {"name": "iso", "cdrom": {}},
    ]
    out = _defaulted(vmi)["spec"]
    assert out["domain"]["devices"]["disks"] == [
        {"name": "root", "disk": {"bus": "virtio"}},
        {"name": "iso", "cdrom": {"bus": "sata", "readonly": True, "tray": "closed"}},
        {"name": "data", "disk": {"bus": "sata"}},
    ]
    assert [v["containerDisk"]["imagePullPolicy"] for v in out["volumes"][:2]] == [
        "IfNotPresent",
        "Always",
    ]
    assert disk_target_names(out) == {"root": "vda", "iso": "sda", "data": "sdb"}


def test_arm64_uses_virtio_and_efi() -> None:
    vmi = _vmi(architecture="arm64", volumes=[{"name": "d", "emptyDisk": {"capacity": "1Gi"}}])
    out = _defaulted(vmi)["spec"]
    assert out["domain"]["devices"]["disks"] == [{"name": "d", "disk": {"bus": "virtio"}}]
    assert out["domain"]["firmware"]["bootloader"] == {"efi": {"secureBoot": False}}
    assert out["domain"]["machine"]["type"] == "virt"
    assert out["domain"]["cpu"]["model"] == "host-passthrough"


def test_configured_disk_bus_wins() -> None:
    vmi = _vmi(volumes=[{"name": "d", "emptyDisk": {"capacity": "1Gi"}}])
    out = _defaulted(vmi, DefaultsConfig(disk_bus="virtio"))["spec"]
    assert out["domain"]["devices"]["disks"] == [{"name": "d", "disk": {"bus": "virtio"}}]
    assert disk_target_names(out) == {"d": "vda"}


def test_device_features_timers_and_probes() -> None:
    vmi = _vmi(readinessProbe={"tcpSocket": {"port": 22}, "periodSeconds": 0})
    domain = vmi["spec"]["domain"]
    domain["devices"].update(inputs=[{"name": "tablet"}], watchdog={"name": "w"})
    domain["features"] = {
        "acpi": {},
        "hyperv": {"relaxed": {}, "spinlocks": {}, "synictimer": {"direct": {}}},
    }
    domain["clock"] = {"timer": {"hpet": {"present": False}, "rtc": {}}}
    out = _defaulted(vmi)["spec"]
    devices, features = out["domain"]["devices"], out["domain"]["features"]
    assert devices["inputs"] == [{"name": "tablet", "bus": "usb", "type": "tablet"}]
    assert devices["watchdog"] == {"name": "w", "i6300esb": {"action": "reset"}}
    assert features["acpi"] == {"enabled": True}
    assert features["hyperv"]["spinlocks"] == {"enabled": True, "spinlocks": 4096}
    assert features["hyperv"]["synictimer"] == {"enabled": True, "direct": {"enabled": True}}
    assert out["domain"]["clock"]["timer"]["hpet"] == {"present": False, "enabled": True}
    assert out["readinessProbe"] == {
        "tcpSocket": {"port": 22},
        "periodSeconds": 10,
        "timeoutSeconds": 1,
        "successThreshold": 1,
        "failureThreshold": 3,
    }


def test_autoattach_flags_default_to_true() -> None:
    spec = _vmi()["spec"]
    assert autoattach_serial_console(spec)
    assert autoattach_graphics(spec)
    spec["domain"]["devices"].update(autoattachSerialConsole=False, autoattachGraphicsDevice=False)
    assert not autoattach_serial_console(spec)
    assert not autoattach_graphics(spec)


def test_input_is_not_modified_and_result_is_deterministic() -> None:
    vmi = _vmi()
    before = copy.deepcopy(vmi)
    assert _defaulted(vmi) == _defaulted(vmi)
    assert vmi == before


def _apply(doc: Any, ops: list[dict[str, Any]]) -> Any:
    """A minimal RFC 6902 applier for add/replace/remove, to check json_patch."""
    doc = copy.deepcopy(doc)
    for op in ops:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        if not parts:
            doc = op["value"]
            continue
        parent = doc
        for part in parts[:-1]:
            parent = parent[int(part)] if isinstance(parent, list) else parent[part]
        if op["op"] == "remove":
            del parent[parts[-1]]
        else:
            parent[parts[-1]] = op["value"]
    return doc


def test_json_patch_turns_the_object_into_its_defaulted_form() -> None:
    vmi = _vmi()
    vmi["metadata"]["annotations"] = {"a/b~c": "1", "gone": "x"}
    new = _defaulted(vmi)
    new["metadata"]["annotations"] = {"a/b~c": "2"}
    ops = json_patch(vmi, new)
    assert {"op": "replace", "path": "/metadata/annotations/a~1b~0c", "value": "2"} in ops
    assert {"op": "remove", "path": "/metadata/annotations/gone"} in ops
    assert _apply(vmi, ops) == new
    assert json_patch(new, new) == []


def _example_vmis() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in sorted(EXAMPLES.glob("vmi-*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") == "VirtualMachineInstance":
                found.append((path.name, doc))
    return found


@pytest.mark.parametrize(("name", "doc"), _example_vmis(), ids=[n for n, _ in _example_vmis()])
def test_defaulted_examples_stay_valid_and_defaulting_is_idempotent(
    name: str, doc: dict[str, Any]
) -> None:
    once = _defaulted(doc)
    load(VirtualMachineInstance, once)
    assert _defaulted(once) == once


def test_vm_defaults() -> None:
    vm = yaml.safe_load((EXAMPLES / "vm-cirros.yaml").read_text())
    created = vm_defaults(vm, CONFIG, create=True, new_uuid=_uuid)
    template = created["spec"]["template"]["spec"]
    assert template["domain"]["firmware"] == {"uuid": _uuid(), "serial": _uuid()}
    assert template["domain"]["machine"] == {"type": "q35"}
    assert template["architecture"] == "amd64"
    updated = vm_defaults(vm, CONFIG, create=False)
    assert "firmware" not in updated["spec"]["template"]["spec"]["domain"]
    typed = default_vm(load(VirtualMachine, vm), CONFIG, create=True, new_uuid=_uuid)
    assert typed.spec.template.spec.domain.machine is not None
    assert typed.spec.template.spec.domain.machine.type == "q35"


def test_typed_vmi_defaulting() -> None:
    vmi = default_vmi(load(VirtualMachineInstance, _vmi()), CONFIG, new_uuid=_uuid)
    assert vmi.spec.domain.cpu is not None
    assert (
        vmi.spec.domain.cpu.sockets,
        vmi.spec.domain.cpu.cores,
        vmi.spec.domain.cpu.threads,
    ) == (1, 1, 1)
    assert vmi.spec.networks is not None
    assert vmi.spec.networks[0].pod is not None


def test_hyperv_requirements_are_enabled_and_evmcs_needs_vmx() -> None:
    vmi = _vmi()
    vmi["spec"]["domain"]["features"] = {"hyperv": {"synictimer": {}, "evmcs": {}}}
    out = _defaulted(vmi)["spec"]["domain"]
    hyperv = out["features"]["hyperv"]
    assert hyperv["synic"] == {"enabled": True}
    assert hyperv["vpindex"] == {"enabled": True}
    assert hyperv["vapic"] == {"enabled": True}
    assert out["cpu"]["features"] == [{"name": "vmx", "policy": "require"}]


def test_hyperv_requirement_disabled_by_the_user_is_left_alone() -> None:
    vmi = _vmi()
    vmi["spec"]["domain"]["features"] = {"hyperv": {"synic": {}, "vpindex": {"enabled": False}}}
    hyperv = _defaulted(vmi)["spec"]["domain"]["features"]["hyperv"]
    assert hyperv["vpindex"] == {"enabled": False}


def test_live_update_rollout_sets_hotplug_headroom() -> None:
    config = DefaultsConfig(vm_rollout_strategy="LiveUpdate")
    vmi = _vmi()
    vmi["spec"]["domain"]["resources"]["requests"]["memory"] = "2Gi"
    domain = _defaulted(vmi, config)["spec"]["domain"]
    assert domain["cpu"]["maxSockets"] == 4
    assert domain["memory"] == {"guest": "2Gi", "maxGuest": "8Gi"}
    # Below 1Gi of guest memory there is no memory hotplug, as upstream.
    small = _defaulted(_vmi(), config)["spec"]["domain"]
    assert "maxGuest" not in small["memory"]
    assert "maxSockets" not in _defaulted(_vmi())["spec"]["domain"]["cpu"]


def test_vcpu_headroom_is_capped() -> None:
    config = DefaultsConfig(vm_rollout_strategy="LiveUpdate")
    vmi = _vmi()
    vmi["spec"]["domain"]["cpu"] = {"sockets": 2, "cores": 64, "threads": 2}
    assert _defaulted(vmi, config)["spec"]["domain"]["cpu"]["maxSockets"] == 4


def test_config_from_a_kubevirt_cr() -> None:
    config = DefaultsConfig.from_kubevirt(
        {
            "architectureConfiguration": {"amd64": {"machineType": "pc-q35-rhel9"}},
            "cpuModel": "Haswell",
            "network": {
                "defaultNetworkInterface": "bridge",
                "permitBridgeInterfaceOnPodNetwork": False,
            },
            "vmRolloutStrategy": "LiveUpdate",
            "liveUpdateConfiguration": {"maxHotplugRatio": 2},
            "developerConfiguration": {"useEmulation": True, "featureGates": ["Sidecar"]},
        }
    )
    assert config.machine_type_for("amd64") == "pc-q35-rhel9"
    assert config.machine_type_for("arm64") == "virt"
    assert (config.cpu_model, config.network_interface, config.max_hotplug_ratio) == (
        "Haswell",
        "bridge",
        2,
    )
    assert not config.permit_bridge_interface_on_pod_network
    assert DefaultsConfig.from_kubevirt(None) == DefaultsConfig()
    legacy = DefaultsConfig.from_kubevirt(
        {
            "machineType": "pc-q35-8.0",
            "architectureConfiguration": {"amd64": {"machineType": "q35"}},
        }
    )
    assert legacy.machine_type_for("amd64") == "pc-q35-8.0"


def test_an_admitted_vmi_is_pending_with_the_finalizer_once() -> None:
    vmi = {"metadata": {"name": "a", "finalizers": ["other"]}, "spec": {}}
    out = admitted_vmi(vmi, "2026-12-01T00:00:00Z")
    assert out["metadata"]["finalizers"] == ["other", VMI_FINALIZER]
    assert out["status"] == {
        "phase": "Pending",
        "phaseTransitionTimestamps": [
            {"phase": "Pending", "phaseTransitionTimestamp": "2026-12-01T00:00:00Z"}
        ],
    }
    assert vmi["metadata"]["finalizers"] == ["other"]  # the input is untouched
    again = admitted_vmi(out, "2026-12-02T00:00:00Z")
    assert again == out  # idempotent: one finalizer, the first stamp kept
    scheduled = admitted_vmi({"status": {"phase": "Scheduled"}}, "2026-12-01T00:00:00Z")
    assert scheduled["status"] == {"phase": "Scheduled"}
