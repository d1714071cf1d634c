"""A preference applied to a VMI spec: it only fills what the VM leaves unset, never conflicts.

Mirrors upstream's ``pkg/instancetype/preference/apply``: CPU features, devices (buses,
models, autoattach, virtio transitional, multi-queue, hotplug, sound, RNG, TPM, video,
panic devices), features, firmware, machine type, clock, subdomain, termination grace
period, architecture, annotations and launch security. The preferred CPU topology does
not apply here: it shapes the instancetype's vCPUs (see ``apply``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ..values import as_int, as_map, as_str
from ._json import JSON, child, clone, items, unset

__all__ = [
    "DEFAULT_SPREAD_RATIO",
    "SPREAD_ACROSS_CORES_THREADS",
    "SPREAD_ACROSS_SOCKETS_CORES",
    "SPREAD_ACROSS_SOCKETS_CORES_THREADS",
    "apply_auto_attach_preferences",
    "apply_preference",
    "apply_preference_to_vm",
    "preferred_topology",
    "spread_options",
]

DEFAULT_SPREAD_RATIO: Final = 2
SPREAD_ACROSS_SOCKETS_CORES: Final = "SocketsCores"
SPREAD_ACROSS_CORES_THREADS: Final = "CoresThreads"
SPREAD_ACROSS_SOCKETS_CORES_THREADS: Final = "SocketsCoresThreads"

_AUTOATTACH: Final = (
    ("preferredAutoattachGraphicsDevice", "autoattachGraphicsDevice"),
    ("preferredAutoattachMemBalloon", "autoattachMemBalloon"),
    ("preferredAutoattachPodInterface", "autoattachPodInterface"),
    ("preferredAutoattachSerialConsole", "autoattachSerialConsole"),
    ("preferredAutoattachInputDevice", "autoattachInputDevice"),
)
_DEVICE_FLAGS: Final = (
    ("preferredUseVirtioTransitional", "useVirtioTransitional"),
    ("preferredBlockMultiQueue", "blockMultiQueue"),
    ("preferredNetworkInterfaceMultiQueue", "networkInterfaceMultiqueue"),
)
_FEATURES: Final = (
    ("preferredApic", "apic"),
    ("preferredKvm", "kvm"),
    ("preferredPvspinlock", "pvspinlock"),
    ("preferredSmm", "smm"),
)
# Upstream's names, old ones included ("preferSockets" is "sockets").
_TOPOLOGIES: Final = {
    "preferSockets": "sockets",
    "preferCores": "cores",
    "preferThreads": "threads",
    "preferSpread": "spread",
    "preferAny": "any",
}


def preferred_topology(preference: Mapping[str, Any] | None) -> str:
    """The preference's CPU topology, in current spelling (default ``sockets``)."""
    topology = as_str(as_map(as_map(preference).get("cpu")).get("preferredCPUTopology"))
    if not topology:
        return "sockets"
    return _TOPOLOGIES.get(topology, topology)


def spread_options(preference: Mapping[str, Any] | None) -> tuple[int, str]:
    """(ratio, across) of a spread topology: ratio 2 across SocketsCores unless set."""
    pref = as_map(preference)
    ratio = as_int(pref.get("preferSpreadSocketToCoreRatio")) or DEFAULT_SPREAD_RATIO
    across = SPREAD_ACROSS_SOCKETS_CORES
    options = as_map(as_map(pref.get("cpu")).get("spreadOptions"))
    if as_str(options.get("across")):
        across = str(options["across"])
    if as_int(options.get("ratio")) is not None:
        ratio = int(options["ratio"])
    return ratio, across


def apply_auto_attach_preferences(preference: Mapping[str, Any] | None, spec: JSON) -> None:
    """Fill the unset ``autoattach*`` device flags of `spec` from the preference (in place)."""
    preferred = as_map(as_map(preference).get("devices"))
    if not preferred:
        return
    devices = child(child(spec, "domain"), "devices")
    for source, target in _AUTOATTACH:
        if preferred.get(source) is not None and unset(devices, target):
            devices[target] = preferred[source]


def _cpu(pref: Mapping[str, Any], spec: JSON) -> None:
    features = [f for f in as_map(pref.get("cpu")).get("preferredCPUFeatures") or () if f]
    if not features:
        return
    cpu = child(child(spec, "domain"), "cpu")
    present = {as_map(f).get("name") for f in items(cpu, "features")}
    for feature in features:
        if as_map(feature).get("name") not in present:
            cpu.setdefault("features", []).append(clone(feature))


def _disks(preferred: Mapping[str, Any], devices: JSON) -> None:
    for disk in items(devices, "disks"):
        if all(unset(disk, target) for target in ("disk", "cdrom", "lun")):
            disk["disk"] = {}
        if isinstance(disk.get("disk"), dict):
            target = disk["disk"]
            if preferred.get("preferredDiskBus") and not target.get("bus"):
                target["bus"] = preferred["preferredDiskBus"]
            if preferred.get("preferredDiskBlockSize") is not None and unset(disk, "blockSize"):
                disk["blockSize"] = clone(preferred["preferredDiskBlockSize"])
            if preferred.get("preferredDiskCache") and not disk.get("cache"):
                disk["cache"] = preferred["preferredDiskCache"]
            if preferred.get("preferredDiskIO") and not disk.get("io"):
                disk["io"] = preferred["preferredDiskIO"]
            if (
                preferred.get("preferredDiskDedicatedIoThread") is not None
                and unset(disk, "dedicatedIOThread")
                and target.get("bus") == "virtio"
            ):
                disk["dedicatedIOThread"] = preferred["preferredDiskDedicatedIoThread"]
        else:
            for target_name, bus in (("cdrom", "preferredCdromBus"), ("lun", "preferredLunBus")):
                target = disk.get(target_name)
                if isinstance(target, dict):
                    if preferred.get(bus) and not target.get("bus"):
                        target["bus"] = preferred[bus]
                    break


# Interface binding methods: an interface naming none of these (nor a plugin) is unbound.
_BINDINGS: Final = ("bridge", "slirp", "masquerade", "sriov", "macvtap", "passt", "binding")


def _interfaces(preferred: Mapping[str, Any], spec: JSON, devices: JSON) -> None:
    pod_networks = {
        n.get("name"): not unset(n, "pod") for n in items(spec, "networks") if "name" in n
    }
    for iface in items(devices, "interfaces"):
        if preferred.get("preferredInterfaceModel") and not iface.get("model"):
            iface["model"] = preferred["preferredInterfaceModel"]
        if (
            preferred.get("preferredInterfaceMasquerade") is not None
            and all(unset(iface, b) for b in _BINDINGS)
            and pod_networks.get(iface.get("name"), False)
        ):
            iface["masquerade"] = clone(preferred["preferredInterfaceMasquerade"])


def _devices(pref: Mapping[str, Any], spec: JSON) -> None:
    preferred = as_map(pref.get("devices"))
    if not preferred:
        return
    devices = child(child(spec, "domain"), "devices")
    for source, target in _DEVICE_FLAGS:
        if preferred.get(source) is not None and unset(devices, target):
            devices[target] = preferred[source]
    # Upstream cannot tell an unset disableHotplug from false (not a pointer): it overrides.
    if preferred.get("preferredDisableHotplug") is not None:
        devices["disableHotplug"] = preferred["preferredDisableHotplug"]
    sound = devices.get("sound")
    if preferred.get("preferredSoundModel") and isinstance(sound, dict) and not sound.get("model"):
        sound["model"] = preferred["preferredSoundModel"]
    for source, target in (("preferredRng", "rng"), ("preferredTPM", "tpm")):
        if preferred.get(source) is not None and unset(devices, target):
            devices[target] = clone(preferred[source])
    if preferred.get("preferredVideoType") is not None:
        video = child(devices, "video")
        if not video.get("type"):
            video["type"] = preferred["preferredVideoType"]
    apply_auto_attach_preferences(pref, spec)
    _disks(preferred, devices)
    _interfaces(preferred, spec, devices)
    for device in items(devices, "inputs"):
        if preferred.get("preferredInputBus") and not device.get("bus"):
            device["bus"] = preferred["preferredInputBus"]
        if preferred.get("preferredInputType") and not device.get("type"):
            device["type"] = preferred["preferredInputType"]
    model = preferred.get("preferredPanicDeviceModel")
    if model is not None:
        panics = items(devices, "panicDevices")
        if not panics:
            devices["panicDevices"] = [{"model": model}]
        for panic in panics:
            if unset(panic, "model"):
                panic["model"] = model


def _features(pref: Mapping[str, Any], spec: JSON) -> None:
    preferred = as_map(pref.get("features"))
    if not preferred:
        return
    features = child(child(spec, "domain"), "features")
    # Upstream's VMI acpi is not a pointer, so a preference for it always wins.
    if preferred.get("preferredAcpi") is not None:
        features["acpi"] = clone(preferred["preferredAcpi"])
    for source, target in _FEATURES:
        if preferred.get(source) is not None and unset(features, target):
            features[target] = clone(preferred[source])
    hyperv_preferred = preferred.get("preferredHyperv")
    if isinstance(hyperv_preferred, Mapping):
        hyperv = child(features, "hyperv")
        for name, value in hyperv_preferred.items():
            if value is not None and unset(hyperv, name):
                hyperv[name] = clone(value)


def _firmware(pref: Mapping[str, Any], spec: JSON) -> None:
    preferred = as_map(pref.get("firmware"))
    if not preferred:
        return
    loader = child(child(child(spec, "domain"), "firmware"), "bootloader")
    neither = unset(loader, "bios") and unset(loader, "efi")
    if preferred.get("preferredUseBios") is True and neither:
        loader["bios"] = {}
    bios = loader.get("bios")
    if (
        preferred.get("preferredUseBiosSerial") is not None
        and isinstance(bios, dict)
        and unset(bios, "useSerial")
    ):
        bios["useSerial"] = preferred["preferredUseBiosSerial"]
    if unset(loader, "efi") and unset(loader, "bios") and preferred.get("preferredEfi") is not None:
        loader["efi"] = clone(preferred["preferredEfi"])
        return  # preferredEfi replaces the deprecated preferredUseEfi / preferredUseSecureBoot
    if preferred.get("preferredUseEfi") is True and unset(loader, "efi") and unset(loader, "bios"):
        loader["efi"] = {}
    efi = loader.get("efi")
    if (
        preferred.get("preferredUseSecureBoot") is not None
        and isinstance(efi, dict)
        and unset(efi, "secureBoot")
    ):
        efi["secureBoot"] = preferred["preferredUseSecureBoot"]


def _clock(pref: Mapping[str, Any], spec: JSON) -> None:
    preferred = pref.get("clock")
    if not isinstance(preferred, Mapping):
        return
    clock = child(child(spec, "domain"), "clock")
    offset = preferred.get("preferredClockOffset")
    # No partial overwrite: the offset is taken only when the VM names neither kind.
    if isinstance(offset, Mapping) and unset(clock, "utc") and unset(clock, "timezone"):
        clock.update(clone(dict(offset)))
    if preferred.get("preferredTimer") is not None and unset(clock, "timer"):
        clock["timer"] = clone(preferred["preferredTimer"])


def _fill(spec: JSON, key: str, value: object) -> None:
    if value is not None and value != "" and not spec.get(key):
        spec[key] = clone(value)


def apply_preference(
    preference: Mapping[str, Any] | None, spec: JSON, annotations: JSON | None = None
) -> None:
    """Apply a preference spec to a VMI `spec` and its `annotations`, in place."""
    if preference is None:
        return
    pref = as_map(preference)
    _cpu(pref, spec)
    _devices(pref, spec)
    _features(pref, spec)
    _firmware(pref, spec)
    machine_type = as_map(pref.get("machine")).get("preferredMachineType")
    if machine_type:
        machine = child(child(spec, "domain"), "machine")
        if not machine.get("type"):
            machine["type"] = machine_type
    _clock(pref, spec)
    _fill(spec, "subdomain", pref.get("preferredSubdomain"))
    if pref.get("preferredTerminationGracePeriodSeconds") is not None and unset(
        spec, "terminationGracePeriodSeconds"
    ):
        spec["terminationGracePeriodSeconds"] = pref["preferredTerminationGracePeriodSeconds"]
    _fill(spec, "architecture", pref.get("preferredArchitecture"))
    if annotations is not None:
        for key, value in as_map(pref.get("annotations")).items():
            annotations.setdefault(key, value)
    if pref.get("preferredLaunchSecurity") is not None:
        domain = child(spec, "domain")
        if unset(domain, "launchSecurity"):
            domain["launchSecurity"] = clone(pref["preferredLaunchSecurity"])


def apply_preference_to_vm(preference: Mapping[str, Any] | None, vm: Mapping[str, Any]) -> JSON:
    """What upstream's VM mutator takes from a preference before the VM defaults: the
    preferred architecture and machine type of the template (when unset) and the
    preferred storage class of the data volume templates. A copy; `vm` is untouched."""
    out: JSON = clone(dict(vm))
    pref = as_map(preference)
    spec = out.get("spec")
    if not pref or not isinstance(spec, dict):
        return out
    template = spec.get("template")
    if isinstance(template, dict):
        tspec = child(template, "spec")
        _fill(tspec, "architecture", pref.get("preferredArchitecture"))
        machine_type = as_map(pref.get("machine")).get("preferredMachineType")
        if machine_type:
            machine = child(child(tspec, "domain"), "machine")
            if not machine.get("type"):
                machine["type"] = machine_type
    storage_class = as_map(pref.get("volumes")).get("preferredStorageClassName")
    if storage_class:
        for template in items(spec, "dataVolumeTemplates"):
            dv_spec = as_map(template.get("spec"))
            for key in ("pvc", "storage"):
                claim = dv_spec.get(key)
                if isinstance(claim, dict) and claim.get("storageClassName") is None:
                    claim["storageClassName"] = storage_class
    return out
