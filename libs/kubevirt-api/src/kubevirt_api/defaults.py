"""Defaulting of VirtualMachineInstances and VirtualMachines, as upstream KubeVirt does it.

Pure functions over plain dicts (the JSON of an object): each returns a defaulted deep
copy and never touches its input, so a mutating webhook computes its JSON patch with
:func:`json_patch` (old, new) and the controllers share the very same rules. Typed
wrappers (:func:`default_vmi`, :func:`default_vm`) round-trip through the models.
Randomness (firmware UUIDs) comes from an injectable ``new_uuid``.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, NotRequired, TypedDict

from kubevirt_api.codec import dump, load
from kubevirt_api.models import VirtualMachine, VirtualMachineInstance
from kubevirt_api.quantity import Quantity, QuantityError
from kubevirt_api.sanitizers import sanitize_vmi_spec
from kubevirt_api.values import as_map, object_at

__all__ = [
    "VMI_FINALIZER",
    "DefaultingError",
    "DefaultsConfig",
    "PatchOperation",
    "admitted_vmi",
    "autoattach_graphics",
    "autoattach_pod_interface",
    "autoattach_serial_console",
    "default_network_interface",
    "default_vm",
    "default_vmi",
    "default_volume_disks",
    "disk_target_names",
    "json_patch",
    "vm_defaults",
    "vmi_defaults",
    "vmi_spec_defaults",
]

JSON = dict[str, Any]

# Upstream's cluster-wide default CPU request; only a different configured value is written.
_UPSTREAM_CPU_REQUEST: Final = Quantity.parse("100m")
_DISK_DEVICES: Final = ("disk", "cdrom", "lun")
# Timers and features whose ``enabled`` defaults to true when the object is present.
_TIMERS: Final = ("hpet", "pit", "rtc", "kvm", "hyperv")
_FEATURES: Final = ("acpi", "apic", "smm", "pvspinlock")
_HYPERV_FEATURES: Final = (
    "relaxed",
    "vapic",
    "vpindex",
    "runtime",
    "synic",
    "synictimer",
    "reset",
    "frequencies",
    "reenlightenment",
    "ipi",
    "evmcs",
    "vendorid",
    "spinlocks",
)


class PatchOperation(TypedDict):
    """One RFC 6902 operation (same shape as kube_runtime's JsonPatchOp)."""

    op: Literal["add", "remove", "replace", "test", "move", "copy"]
    path: str
    value: NotRequired[Any]


class DefaultingError(ValueError):
    """The object cannot be defaulted under this configuration (e.g. bridge not permitted)."""


@dataclass(frozen=True)
class DefaultsConfig:
    """Cluster settings defaulting depends on (from the KubeVirt CR's configuration).

    ``network_interface`` is ``masquerade`` here; upstream's built-in default is ``bridge``.
    ``cpu_request`` is written only when it differs from upstream's 100m.
    ``disk_bus`` overrides the per-architecture default (amd64: sata, arm64/s390x: virtio).
    ``vm_rollout_strategy`` is ``Stage`` here; upstream's default ``LiveUpdate`` also sets
    ``cpu.maxSockets`` and ``memory.maxGuest`` (CPU and memory hotplug headroom, scaled
    by ``max_hotplug_ratio``) on every new VMI.
    """

    architecture: str = "amd64"
    machine_type: str | None = None
    machine_types: Mapping[str, str] = field(default_factory=dict)
    cpu_model: str | None = None
    cpu_request: str | None = None
    network_interface: str = "masquerade"
    permit_bridge_interface_on_pod_network: bool = True
    eviction_strategy: str | None = None
    disk_bus: str | None = None
    vm_rollout_strategy: str = "Stage"
    max_hotplug_ratio: int = 4
    max_cpu_sockets: int | None = None
    max_guest: str | None = None

    @classmethod
    def from_kubevirt(cls, configuration: Mapping[str, Any] | None) -> DefaultsConfig:
        """Settings from a KubeVirt CR's ``spec.configuration`` (a plain dict).

        What the CR leaves out keeps this class's defaults (see the class docstring).
        """
        conf: Mapping[str, Any] = configuration or {}
        arch_conf = as_map(conf.get("architectureConfiguration"))
        machine_types = {
            arch: str(as_map(arch_conf.get(arch)).get("machineType"))
            for arch in ("amd64", "arm64", "s390x", "ppc64le")
            if as_map(arch_conf.get(arch)).get("machineType")
        }
        network = as_map(conf.get("network"))
        live = as_map(conf.get("liveUpdateConfiguration"))
        base = cls()
        return cls(
            architecture=str(arch_conf.get("defaultArchitecture") or base.architecture),
            machine_type=conf.get("machineType") or None,
            machine_types=machine_types,
            cpu_model=conf.get("cpuModel") or None,
            cpu_request=_text(conf.get("cpuRequest")),
            network_interface=str(network.get("defaultNetworkInterface") or base.network_interface),
            permit_bridge_interface_on_pod_network=network.get("permitBridgeInterfaceOnPodNetwork")
            is not False,
            eviction_strategy=conf.get("evictionStrategy") or None,
            vm_rollout_strategy=str(conf.get("vmRolloutStrategy") or base.vm_rollout_strategy),
            max_hotplug_ratio=int(live.get("maxHotplugRatio") or base.max_hotplug_ratio),
            max_cpu_sockets=live.get("maxCpuSockets") or None,
            max_guest=_text(live.get("maxGuest")),
        )

    def machine_type_for(self, architecture: str) -> str:
        """The default machine type of an architecture (a cluster-wide one wins, as upstream)."""
        if self.machine_type:
            return self.machine_type
        if architecture in self.machine_types:
            return self.machine_types[architecture]
        return {"arm64": "virt", "s390x": "s390-ccw-virtio"}.get(architecture, "q35")

    def disk_bus_for(self, architecture: str) -> str:
        """The bus given to disks, CD-ROMs and LUNs that name none."""
        if self.disk_bus:
            return self.disk_bus
        return "sata" if architecture in ("amd64", "") else "virtio"


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def _new_uuid() -> str:
    return str(uuid.uuid4())


_obj = object_at


def _list(parent: Mapping[str, Any], key: str) -> list[Any]:
    value = parent.get(key)
    return value if isinstance(value, list) else []


def _quantity(value: object) -> Quantity | None:
    try:
        return Quantity.parse(value) if value is not None else None
    except QuantityError:
        return None  # the schema check reports it; defaulting just skips it


def _nonzero(value: object) -> bool:
    quantity = _quantity(value)
    return quantity is not None and quantity.value != 0


def autoattach_pod_interface(spec: Mapping[str, Any]) -> bool:
    """Whether the pod network is attached when no interface is given (default: yes)."""
    devices = spec.get("domain", {}).get("devices", {}) or {}
    return devices.get("autoattachPodInterface") is not False


def autoattach_serial_console(spec: Mapping[str, Any]) -> bool:
    """Whether the VMI gets a serial console (unset means yes, as upstream)."""
    devices = spec.get("domain", {}).get("devices", {}) or {}
    return devices.get("autoattachSerialConsole") is not False


def autoattach_graphics(spec: Mapping[str, Any]) -> bool:
    """Whether the VMI gets a VGA device and VNC (unset means yes, as upstream)."""
    devices = spec.get("domain", {}).get("devices", {}) or {}
    return devices.get("autoattachGraphicsDevice") is not False


def _device_letters(index: int) -> str:
    letters = ""
    index += 1
    while index:
        index, rest = divmod(index - 1, 26)
        letters = chr(ord("a") + rest) + letters
    return letters


def disk_target_names(
    spec: Mapping[str, Any], config: DefaultsConfig | None = None
) -> dict[str, str]:
    """Guest device names by disk name (``vda``, ``sda``, ...), in disk order per bus prefix.

    virtio disks are ``vd*``; sata, scsi and usb share ``sd*``. A disk without a bus counts
    as the configuration's default bus.
    """
    config = config or DefaultsConfig()
    default_bus = config.disk_bus_for(str(spec.get("architecture") or config.architecture))
    counters: dict[str, int] = {}
    names: dict[str, str] = {}
    for disk in _list(spec.get("domain", {}).get("devices", {}) or {}, "disks"):
        if not isinstance(disk, dict) or not isinstance(disk.get("name"), str):
            continue
        device: JSON = next((disk[k] for k in _DISK_DEVICES if isinstance(disk.get(k), dict)), {})
        bus = device.get("bus") or default_bus
        prefix = "vd" if bus == "virtio" else "hd" if bus == "ide" else "sd"
        index = counters.get(prefix, 0)
        counters[prefix] = index + 1
        names[disk["name"]] = prefix + _device_letters(index)
    return names


def vmi_spec_defaults(spec: Mapping[str, Any], config: DefaultsConfig) -> JSON:
    """The spec-level defaults upstream applies to a new VMI (or a VM template's spec)."""
    out: JSON = copy.deepcopy(dict(sanitize_vmi_spec(spec)))
    domain = _obj(out, "domain")
    _obj(domain, "devices")
    if not out.get("architecture"):
        out["architecture"] = config.architecture
    arch = str(out["architecture"])

    machine = _obj(domain, "machine")
    if not machine.get("type"):
        machine["type"] = config.machine_type_for(arch)

    resources = _obj(domain, "resources")
    requests: JSON = resources["requests"] if isinstance(resources.get("requests"), dict) else {}
    limits: JSON = resources["limits"] if isinstance(resources.get("limits"), dict) else {}
    if _nonzero(limits.get("cpu")) and not _nonzero(requests.get("cpu")):
        requests = _obj(resources, "requests")
        requests["cpu"] = copy.deepcopy(limits["cpu"])
    configured = _quantity(config.cpu_request)
    if configured is not None and configured != _UPSTREAM_CPU_REQUEST:
        placement = domain["cpu"] if isinstance(domain.get("cpu"), dict) else {}
        if "cpu" not in requests and not placement.get("dedicatedCpuPlacement"):
            requests = _obj(resources, "requests")
            requests["cpu"] = config.cpu_request

    memory = _obj(domain, "memory")
    hugepages = memory.get("hugepages")
    if memory.get("guest") is None:
        if _nonzero(requests.get("memory")):
            memory["guest"] = copy.deepcopy(requests["memory"])
        elif _nonzero(limits.get("memory")):
            memory["guest"] = copy.deepcopy(limits["memory"])
        elif isinstance(hugepages, dict) and _quantity(hugepages.get("pageSize")) is not None:
            memory["guest"] = hugepages["pageSize"]

    cpu = _obj(domain, "cpu")
    if not any(cpu.get(k) for k in ("cores", "sockets", "threads")):
        sockets = 1
        for source in (limits, requests):
            quantity = _quantity(source.get("cpu"))
            if quantity is not None:
                sockets = quantity.to_int()
                break
        cpu.update(sockets=sockets, cores=1, threads=1)

    for volume in _list(out, "volumes"):
        disk = volume.get("containerDisk") if isinstance(volume, dict) else None
        if isinstance(disk, dict) and not disk.get("imagePullPolicy"):
            image = str(disk.get("image", ""))
            floating = image.endswith(":latest") or not any(c in image for c in ":@")
            disk["imagePullPolicy"] = "Always" if floating else "IfNotPresent"

    if out.get("evictionStrategy") is None and config.eviction_strategy is not None:
        out["evictionStrategy"] = config.eviction_strategy

    default_network_interface(out, config)
    default_volume_disks(out)
    return out


def default_network_interface(spec: JSON, config: DefaultsConfig) -> None:
    """Give a spec with no networks the pod network and the configured binding (in place)."""
    devices = _obj(_obj(spec, "domain"), "devices")
    if (
        autoattach_pod_interface(spec)
        and not _list(spec, "networks")
        and not _list(devices, "interfaces")
    ):
        if config.network_interface == "bridge":
            if not config.permit_bridge_interface_on_pod_network:
                raise DefaultingError("bridge interface is not permitted on the pod network")
            devices["interfaces"] = [{"name": "default", "bridge": {}}]
        elif config.network_interface == "masquerade":
            devices["interfaces"] = [{"name": "default", "masquerade": {}}]
        else:
            raise DefaultingError(
                f"unsupported default network interface {config.network_interface!r}"
            )
        spec["networks"] = [{"name": "default", "pod": {}}]


def default_volume_disks(spec: JSON) -> None:
    """Give every volume no disk or filesystem uses a disk of its name (in place)."""
    devices = _obj(_obj(spec, "domain"), "devices")
    attached = {d.get("name") for d in _list(devices, "disks") if isinstance(d, dict)}
    attached |= {f.get("name") for f in _list(devices, "filesystems") if isinstance(f, dict)}
    for volume in _list(spec, "volumes"):
        if isinstance(volume, dict) and volume.get("name") not in attached:
            devices.setdefault("disks", []).append({"name": volume["name"]})
            attached.add(volume["name"])


def _enable(obj: object) -> None:
    if isinstance(obj, dict) and obj.get("enabled") is None:
        obj["enabled"] = True


def _object_defaults(spec: JSON, config: DefaultsConfig, new_uuid: Callable[[], str]) -> None:
    """Per-type defaults (upstream's SetObjectDefaults) and the architecture defaults."""
    domain = _obj(spec, "domain")
    devices = _obj(domain, "devices")
    firmware = _obj(domain, "firmware")
    if not firmware.get("uuid"):
        firmware["uuid"] = new_uuid()
    features = _obj(domain, "features")
    for name in _FEATURES:
        _enable(features.get(name))
    hyperv = features.get("hyperv")
    if isinstance(hyperv, dict):
        for name in _HYPERV_FEATURES:
            _enable(hyperv.get(name))
        spinlocks = hyperv.get("spinlocks")
        if isinstance(spinlocks, dict) and spinlocks.get("enabled") is True:
            spinlocks.setdefault("spinlocks", 4096)
        synictimer = hyperv.get("synictimer")
        if isinstance(synictimer, dict):
            _enable(synictimer.get("direct"))
    clock = domain.get("clock")
    timer = clock.get("timer") if isinstance(clock, dict) else None
    if isinstance(timer, dict):
        for name in _TIMERS:
            _enable(timer.get(name))

    arch = str(spec.get("architecture") or config.architecture)
    bus = config.disk_bus_for(arch)
    for disk in _list(devices, "disks"):
        if not isinstance(disk, dict):
            continue
        if not any(isinstance(disk.get(k), dict) for k in _DISK_DEVICES):
            disk["disk"] = {}
        cdrom = disk.get("cdrom")
        if isinstance(cdrom, dict):
            cdrom.setdefault("readonly", True)
            if not cdrom.get("tray"):
                cdrom["tray"] = "closed"
        for kind in _DISK_DEVICES:
            if isinstance(disk.get(kind), dict) and not disk[kind].get("bus"):
                disk[kind]["bus"] = bus
    for device in _list(devices, "inputs"):
        if isinstance(device, dict):
            device["bus"] = device.get("bus") or "usb"
            device["type"] = device.get("type") or "tablet"
    for probe_key in ("readinessProbe", "livenessProbe"):
        probe = spec.get(probe_key)
        if isinstance(probe, dict):
            for key, minimum, default in (
                ("timeoutSeconds", 1, 1),
                ("periodSeconds", 1, 10),
                ("successThreshold", 1, 1),
                ("failureThreshold", 1, 3),
            ):
                value = probe.get(key)
                if not isinstance(value, int) or value < minimum:
                    probe[key] = default

    cpu = _obj(domain, "cpu")
    if arch == "arm64":
        bootloader = _obj(firmware, "bootloader")
        if not bootloader:
            bootloader["efi"] = {}
        if isinstance(bootloader.get("efi"), dict):
            bootloader["efi"].setdefault("secureBoot", False)
        if not cpu.get("model"):
            cpu["model"] = "host-passthrough"
    elif arch in ("amd64", ""):
        watchdog = devices.get("watchdog")
        if isinstance(watchdog, dict):
            i6300esb = _obj(watchdog, "i6300esb")
            if not i6300esb.get("action"):
                i6300esb["action"] = "reset"
    if not cpu.get("model"):
        cpu["model"] = config.cpu_model or "host-model"


# Hyper-V enlightenments and the one each needs, leaves first (as upstream orders them).
_HYPERV_REQUIRES: Final = (
    ("evmcs", "vapic"),
    ("ipi", "vpindex"),
    ("tlbflush", "vpindex"),
    ("synictimer", "synic"),
    ("synic", "vpindex"),
)
_HOTPLUG_ALIGNMENT: Final = 2 * 1024**2
_HOTPLUG_ALIGNMENT_1G_PAGES: Final = 1024**3
_HOTPLUG_MIN_GUEST: Final = 1024**3
_MAX_VCPUS: Final = 512


def _hyperv_dependencies(spec: JSON) -> None:
    """Enable what enabled Hyper-V features need, when the user left it unset.

    A requirement the user disabled stops here and is left to admission to refuse.
    """
    features = spec["domain"].get("features")
    hyperv = features.get("hyperv") if isinstance(features, dict) else None
    if not isinstance(hyperv, dict):
        return
    for feature, requirement in _HYPERV_REQUIRES:
        state = hyperv.get(feature)
        if not (isinstance(state, dict) and state.get("enabled") is True):
            continue
        required = hyperv.get(requirement)
        if not isinstance(required, dict) or required.get("enabled") is None:
            hyperv[requirement] = {**(required or {}), "enabled": True}
        elif required.get("enabled") is False:
            return  # upstream stops at the first conflict, before the vmx dependency
    evmcs = hyperv.get("evmcs")
    if isinstance(evmcs, dict) and evmcs.get("enabled") is not False:
        cpu = _obj(spec["domain"], "cpu")
        cpu_features = cpu.setdefault("features", [])
        for entry in cpu_features:
            if isinstance(entry, dict) and entry.get("name") == "vmx":
                entry["policy"] = "require"
                break
        else:
            cpu_features.append({"name": "vmx", "policy": "require"})


def _hotplug(spec: JSON, config: DefaultsConfig) -> None:
    """CPU and memory hotplug headroom under the LiveUpdate rollout strategy."""
    if config.vm_rollout_strategy != "LiveUpdate" or spec.get("architecture") == "arm64":
        return
    domain = spec["domain"]
    cpu = domain["cpu"]
    if not cpu.get("maxSockets"):
        sockets, cores, threads = (int(cpu.get(k) or 1) for k in ("sockets", "cores", "threads"))
        max_sockets = config.max_cpu_sockets or 0
        if max_sockets and sockets > max_sockets:
            max_sockets = sockets
        if not max_sockets:
            max_sockets = sockets * config.max_hotplug_ratio
            if max_sockets * cores * threads > _MAX_VCPUS:
                max_sockets = max(_MAX_VCPUS // (cores * threads), sockets)
        cpu["maxSockets"] = max_sockets
    memory = domain["memory"]
    if memory.get("maxGuest") is not None:
        return
    guest = _quantity(memory.get("guest"))
    if config.max_guest is not None:
        max_guest = _quantity(config.max_guest)
    elif guest is not None:
        max_guest = Quantity.from_value(guest.to_int() * config.max_hotplug_ratio, binary=True)
    else:
        max_guest = None
    hugepages = memory.get("hugepages")
    one_gig_pages = isinstance(hugepages, dict) and hugepages.get("pageSize") == "1Gi"
    alignment = _HOTPLUG_ALIGNMENT_1G_PAGES if one_gig_pages else _HOTPLUG_ALIGNMENT
    numa = cpu.get("numa")
    eligible = (
        guest is not None
        and max_guest is not None
        and cpu.get("realtime") is None
        and not (isinstance(numa, dict) and numa.get("guestMappingPassthrough") is not None)
        and domain.get("launchSecurity") is None
        and guest <= max_guest
        and guest.to_int() % alignment == 0
        and max_guest.to_int() % alignment == 0
        and spec.get("architecture") == "amd64"
        and guest.to_int() >= _HOTPLUG_MIN_GUEST
    )
    if eligible and max_guest is not None:
        memory["maxGuest"] = max_guest.to_json()


def vmi_defaults(
    vmi: Mapping[str, Any], config: DefaultsConfig, *, new_uuid: Callable[[], str] = _new_uuid
) -> JSON:
    """A new VMI with upstream's create-time defaults applied (spec and status).

    Raises DefaultingError when the configuration forbids what defaulting would add.
    """
    out: JSON = copy.deepcopy(dict(vmi))
    spec = vmi_spec_defaults(out.get("spec") or {}, config)
    _object_defaults(spec, config, new_uuid)
    _hyperv_dependencies(spec)
    out["spec"] = spec
    status = _obj(out, "status")
    guest = spec["domain"]["memory"].get("guest")
    if guest is not None:
        status["memory"] = {
            "guestAtBoot": guest,
            "guestCurrent": guest,
            "guestRequested": guest,
        }
    if "currentCPUTopology" not in status:
        cpu = spec["domain"]["cpu"]
        status["currentCPUTopology"] = {
            k: cpu[k] for k in ("sockets", "cores", "threads") if k in cpu
        }
    _hotplug(spec, config)
    return out


#: The VMI controller's finalizer, held until the launcher pod is gone (upstream's
#: VirtualMachineInstanceFinalizer).
VMI_FINALIZER: Final = "foregroundDeleteVirtualMachine"


def admitted_vmi(vmi: Mapping[str, Any], now: str) -> JSON:
    """A new VMI as upstream's mutating webhook leaves it: the VMI controller's finalizer,
    and phase Pending with its transition timestamp `now` (RFC 3339).

    VMIs have no status subresource, so this status is stored with the create and the
    controller needs no first write for it. A VMI that names a phase already keeps it.
    """
    out: JSON = copy.deepcopy(dict(vmi))
    metadata = _obj(out, "metadata")
    finalizers = metadata.get("finalizers")
    finalizers = list(finalizers) if isinstance(finalizers, list) else []
    if VMI_FINALIZER not in finalizers:
        metadata["finalizers"] = [*finalizers, VMI_FINALIZER]
    status = _obj(out, "status")
    if not status.get("phase"):
        status["phase"] = "Pending"
        status["phaseTransitionTimestamps"] = [
            {"phase": "Pending", "phaseTransitionTimestamp": now}
        ]
    return out


def vm_defaults(
    vm: Mapping[str, Any],
    config: DefaultsConfig,
    *,
    create: bool,
    new_uuid: Callable[[], str] = _new_uuid,
) -> JSON:
    """A VM with upstream's VM defaults: firmware UUID and serial on create; architecture
    and machine type of the template always. The rest is defaulted on the VMI."""
    out: JSON = copy.deepcopy(dict(vm))
    template = _obj(_obj(out, "spec"), "template")
    # Upstream's VM mutator re-encodes the decoded template, addresses cleaned.
    template["spec"] = copy.deepcopy(dict(sanitize_vmi_spec(_obj(template, "spec"))))
    spec = template["spec"]
    domain = _obj(spec, "domain")
    if create:
        firmware = _obj(domain, "firmware")
        if not firmware.get("uuid"):
            firmware["uuid"] = new_uuid()
        if not firmware.get("serial"):
            firmware["serial"] = new_uuid()
    if not spec.get("architecture"):
        spec["architecture"] = config.architecture
    machine = _obj(domain, "machine")
    if not machine.get("type"):
        machine["type"] = config.machine_type_for(str(spec["architecture"]))
    return out


def default_vmi(
    vmi: VirtualMachineInstance,
    config: DefaultsConfig,
    *,
    new_uuid: Callable[[], str] = _new_uuid,
) -> VirtualMachineInstance:
    """Typed form of :func:`vmi_defaults`."""
    return load(VirtualMachineInstance, vmi_defaults(dump(vmi), config, new_uuid=new_uuid))


def default_vm(
    vm: VirtualMachine,
    config: DefaultsConfig,
    *,
    create: bool,
    new_uuid: Callable[[], str] = _new_uuid,
) -> VirtualMachine:
    """Typed form of :func:`vm_defaults`."""
    return load(VirtualMachine, vm_defaults(dump(vm), config, create=create, new_uuid=new_uuid))


def _pointer(parts: list[str]) -> str:
    return "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in parts)


def json_patch(old: object, new: object, _path: list[str] | None = None) -> list[PatchOperation]:
    """RFC 6902 operations turning ``old`` into ``new`` (objects diffed key by key,
    changed lists replaced whole), ready for an AdmissionResponse patch."""
    path = _path or []
    if isinstance(old, dict) and isinstance(new, dict):
        ops: list[PatchOperation] = []
        for key in old:
            if key not in new:
                ops.append({"op": "remove", "path": _pointer([*path, key])})
        for key, value in new.items():
            if key not in old:
                ops.append({"op": "add", "path": _pointer([*path, key]), "value": value})
            else:
                ops.extend(json_patch(old[key], value, [*path, key]))
        return ops
    if old == new and type(old) is type(new):
        return []
    return [{"op": "replace", "path": _pointer(path), "value": new}]
