"""Preference rules: they fill only what the VM leaves unset."""

from __future__ import annotations

from typing import Any

from kubevirt_api.instancetypes import apply_to_vmi_spec

BASE = "spec.template.spec"


def _apply(
    preference: dict[str, Any], spec: dict[str, Any], annotations: dict[str, Any] | None = None
) -> Any:
    applied = apply_to_vmi_spec(BASE, None, preference, spec, annotations)
    assert applied.conflicts == ()
    return applied


def test_disk_buses_follow_the_target_kind_and_keep_what_the_vm_sets() -> None:
    spec = {
        "domain": {
            "devices": {
                "disks": [
                    {"name": "a"},
                    {"name": "b", "disk": {"bus": "sata"}},
                    {"name": "c", "cdrom": {}},
                    {"name": "d", "lun": {}},
                ]
            }
        }
    }
    preference = {
        "devices": {
            "preferredDiskBus": "virtio",
            "preferredCdromBus": "scsi",
            "preferredLunBus": "scsi",
            "preferredDiskCache": "none",
            "preferredDiskIO": "native",
            "preferredDiskDedicatedIoThread": True,
            "preferredDiskBlockSize": {"matchVolume": {"enabled": True}},
        }
    }
    disks = _apply(preference, spec).spec["domain"]["devices"]["disks"]
    assert disks[0] == {
        "name": "a",
        "disk": {"bus": "virtio"},
        "blockSize": {"matchVolume": {"enabled": True}},
        "cache": "none",
        "io": "native",
        "dedicatedIOThread": True,
    }
    assert disks[1]["disk"] == {"bus": "sata"}
    assert "dedicatedIOThread" not in disks[1]
    assert disks[2] == {"name": "c", "cdrom": {"bus": "scsi"}}
    assert disks[3] == {"name": "d", "lun": {"bus": "scsi"}}


def test_interface_model_and_masquerade_on_the_pod_network_only() -> None:
    spec = {
        "domain": {
            "devices": {
                "interfaces": [{"name": "pod"}, {"name": "other"}, {"name": "b", "bridge": {}}]
            }
        },
        "networks": [
            {"name": "pod", "pod": {}},
            {"name": "other", "multus": {"networkName": "n"}},
            {"name": "b", "pod": {}},
        ],
    }
    preference = {
        "devices": {"preferredInterfaceModel": "virtio", "preferredInterfaceMasquerade": {}}
    }
    ifaces = _apply(preference, spec).spec["domain"]["devices"]["interfaces"]
    assert ifaces[0] == {"name": "pod", "model": "virtio", "masquerade": {}}
    assert ifaces[1] == {"name": "other", "model": "virtio"}
    assert ifaces[2] == {"name": "b", "bridge": {}, "model": "virtio"}


def test_device_flags_rng_tpm_video_inputs_panic_autoattach() -> None:
    spec = {
        "domain": {
            "devices": {
                "blockMultiQueue": False,
                "inputs": [{"name": "tablet"}],
                "sound": {"name": "s"},
                "autoattachSerialConsole": False,
            }
        }
    }
    preference = {
        "devices": {
            "preferredBlockMultiQueue": True,
            "preferredUseVirtioTransitional": True,
            "preferredNetworkInterfaceMultiQueue": True,
            "preferredDisableHotplug": True,
            "preferredSoundModel": "ich9",
            "preferredRng": {},
            "preferredTPM": {"persistent": True},
            "preferredVideoType": "virtio",
            "preferredInputBus": "usb",
            "preferredInputType": "tablet",
            "preferredPanicDeviceModel": "hyperv",
            "preferredAutoattachSerialConsole": True,
            "preferredAutoattachGraphicsDevice": False,
        }
    }
    devices = _apply(preference, spec).spec["domain"]["devices"]
    assert devices["blockMultiQueue"] is False
    assert devices["useVirtioTransitional"] is True
    assert devices["networkInterfaceMultiqueue"] is True
    assert devices["disableHotplug"] is True
    assert devices["sound"] == {"name": "s", "model": "ich9"}
    assert devices["rng"] == {}
    assert devices["tpm"] == {"persistent": True}
    assert devices["video"] == {"type": "virtio"}
    assert devices["inputs"] == [{"name": "tablet", "bus": "usb", "type": "tablet"}]
    assert devices["panicDevices"] == [{"model": "hyperv"}]
    assert devices["autoattachSerialConsole"] is False
    assert devices["autoattachGraphicsDevice"] is False


def test_features_firmware_machine_clock() -> None:
    spec: dict[str, Any] = {
        "domain": {
            "features": {"apic": {"enabled": False}, "hyperv": {"relaxed": {"enabled": False}}}
        }
    }
    preference = {
        "features": {
            "preferredAcpi": {},
            "preferredApic": {},
            "preferredSmm": {},
            "preferredHyperv": {"relaxed": {}, "vapic": {}},
        },
        "firmware": {"preferredEfi": {"secureBoot": True}},
        "machine": {"preferredMachineType": "pc-q35-rhel9"},
        "clock": {
            "preferredClockOffset": {"utc": {}},
            "preferredTimer": {"hpet": {"present": False}},
        },
    }
    domain = _apply(preference, spec).spec["domain"]
    assert domain["features"] == {
        "acpi": {},
        "apic": {"enabled": False},
        "smm": {},
        "hyperv": {"relaxed": {"enabled": False}, "vapic": {}},
    }
    assert domain["firmware"] == {"bootloader": {"efi": {"secureBoot": True}}}
    assert domain["machine"] == {"type": "pc-q35-rhel9"}
    assert domain["clock"] == {"utc": {}, "timer": {"hpet": {"present": False}}}


def test_a_clock_offset_the_vm_sets_is_kept_whole() -> None:
    spec = {"domain": {"clock": {"timezone": "Europe/Paris"}}}
    preference = {"clock": {"preferredClockOffset": {"utc": {"offsetSeconds": 5}}}}
    assert _apply(preference, spec).spec["domain"]["clock"] == {"timezone": "Europe/Paris"}


def test_bios_wins_over_efi_and_deprecated_efi_flags_apply() -> None:
    bios = _apply(
        {"firmware": {"preferredUseBios": True, "preferredUseBiosSerial": True}}, {"domain": {}}
    )
    assert bios.spec["domain"]["firmware"] == {"bootloader": {"bios": {"useSerial": True}}}
    efi = _apply(
        {"firmware": {"preferredUseEfi": True, "preferredUseSecureBoot": False}}, {"domain": {}}
    )
    assert efi.spec["domain"]["firmware"] == {"bootloader": {"efi": {"secureBoot": False}}}


def test_spec_level_preferences_fill_unset_fields_only() -> None:
    preference = {
        "preferredSubdomain": "sub",
        "preferredTerminationGracePeriodSeconds": 30,
        "preferredArchitecture": "arm64",
        "annotations": {"a": "pref", "b": "pref"},
        "cpu": {"preferredCPUFeatures": [{"name": "vmx"}, {"name": "svm"}]},
        "preferredLaunchSecurity": {"sev": {}},
    }
    spec = {
        "domain": {"cpu": {"features": [{"name": "svm", "policy": "forbid"}]}},
        "terminationGracePeriodSeconds": 0,
    }
    applied = _apply(preference, spec, {"b": "vm"})
    assert applied.spec["subdomain"] == "sub"
    assert applied.spec["terminationGracePeriodSeconds"] == 0
    assert applied.spec["architecture"] == "arm64"
    assert applied.annotations == {"a": "pref", "b": "vm"}
    assert applied.spec["domain"]["cpu"]["features"] == [
        {"name": "svm", "policy": "forbid"},
        {"name": "vmx"},
    ]
    assert applied.spec["domain"]["launchSecurity"] == {"sev": {}}


def test_the_vm_takes_preferred_architecture_machine_and_storage_class_when_unset() -> None:
    from kubevirt_api.instancetypes import apply_preference_to_vm

    vm = {
        "spec": {
            "template": {"spec": {"domain": {"machine": {"type": "q35"}}}},
            "dataVolumeTemplates": [
                {"spec": {"pvc": {}}},
                {"spec": {"storage": {"storageClassName": "mine"}}},
            ],
        }
    }
    preference = {
        "preferredArchitecture": "arm64",
        "machine": {"preferredMachineType": "virt"},
        "volumes": {"preferredStorageClassName": "fast"},
    }
    out = apply_preference_to_vm(preference, vm)
    assert out["spec"]["template"]["spec"]["architecture"] == "arm64"
    assert out["spec"]["template"]["spec"]["domain"]["machine"] == {"type": "q35"}
    assert [t["spec"] for t in out["spec"]["dataVolumeTemplates"]] == [
        {"pvc": {"storageClassName": "fast"}},
        {"storage": {"storageClassName": "mine"}},
    ]
    assert vm["spec"]["dataVolumeTemplates"][0] == {"spec": {"pvc": {}}}
