"""Series read from the VM and VMI caches at scrape time, as upstream's vmstats and
vmistats collectors: resource requests and limits, the status-group transition times, the
creation date, interface details, addresses, migration times and outdated launchers.

Pure functions from one object to its samples; `CacheCollector` writes them into the
registry before each render, so a deleted object's series go with it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kube_runtime import RawObject, thaw
from kubevirt_api import InvalidObjectError, VirtualMachineInstance, load
from kubevirt_api.enums import VirtualMachinePrintableStatus as VmStatus
from kubevirt_api.instancetypes import (
    CLUSTER_INSTANCETYPE_ANNOTATION,
    CLUSTER_PREFERENCE_ANNOTATION,
    INSTANCETYPE_ANNOTATION,
    PREFERENCE_ANNOTATION,
)
from kubevirt_api.quantity import Quantity, QuantityError
from service_kit import Counter, Gauge, MetricsRegistry

from .objects import mapping, meta, parse_time
from .overhead import memory_overhead

__all__ = [
    "OUTDATED_LAUNCHER_LABEL",
    "CacheCollector",
    "Sample",
    "launcher_overhead",
    "vm_samples",
    "vmi_info_labels",
    "vmi_samples",
]

#: virt-operator marks VMIs whose launcher runs an older image with this label.
OUTDATED_LAUNCHER_LABEL = "kubevirt.io/outdatedLauncherImage"


@dataclass(frozen=True)
class Sample:
    """One series of one metric: its name, labels and value."""

    metric: str
    labels: Mapping[str, str]
    value: float


# Upstream's groups of printableStatus, each with its transition-time counter.
_STATUS_GROUPS: tuple[tuple[str, frozenset[str]], ...] = (
    (
        "starting",
        frozenset({VmStatus.PROVISIONING, VmStatus.STARTING, VmStatus.WAITING_FOR_VOLUME_BINDING}),
    ),
    ("running", frozenset({VmStatus.RUNNING})),
    ("migrating", frozenset({VmStatus.MIGRATING})),
    (
        "non_running",
        frozenset({VmStatus.STOPPED, VmStatus.PAUSED, VmStatus.STOPPING, VmStatus.TERMINATING}),
    ),
    ("error", frozenset()),  # every other status, as upstream's default
)
_TRANSITION = "kubevirt_vm_{}_status_last_transition_timestamp_seconds"
_TRANSITION_HELP = {
    "starting": "Virtual Machine last transition timestamp to starting status.",
    "running": "Virtual Machine last transition timestamp to running status.",
    "migrating": "Virtual Machine last transition timestamp to migrating status.",
    "non_running": "Virtual Machine last transition timestamp to paused/stopped status.",
    "error": "Virtual Machine last transition timestamp to error status.",
}
_TRANSITION_CONDITIONS = frozenset({"Ready", "Failure", "Paused"})

_GAUGES: dict[str, tuple[str, Sequence[str]]] = {
    "kubevirt_vm_resource_requests": (
        "Resources requested by Virtual Machine. Reports memory and CPU requests.",
        ("name", "namespace", "resource", "unit", "source"),
    ),
    "kubevirt_vm_resource_limits": (
        "Resource limits set for a Virtual Machine. Reports CPU and memory limits only when "
        "they are defined.",
        ("name", "namespace", "resource", "unit"),
    ),
    "kubevirt_vm_create_date_timestamp_seconds": (
        "Virtual Machine creation timestamp.",
        ("name", "namespace"),
    ),
    "kubevirt_vm_vnic_info": (
        "Details of Virtual Machine (VM) vNIC interfaces, such as vNIC name, binding type, "
        "network name, and binding name for each vNIC defined in the VM's configuration.",
        ("name", "namespace", "vnic_name", "binding_type", "network", "binding_name", "model"),
    ),
    "kubevirt_vmi_status_addresses": (
        "The addresses of a VirtualMachineInstance. This metric provides the address of an "
        "available network interface associated with the VMI in the 'address' label, and "
        "about the type of address, such as internal IP, in the 'type' label.",
        ("node", "namespace", "name", "network_name", "address", "type"),
    ),
    "kubevirt_vmi_vnic_info": (
        "Details of VirtualMachineInstance (VMI) vNIC interfaces, such as vNIC name, binding "
        "type, network name, and binding name for each vNIC of a running instance.",
        ("name", "namespace", "vnic_name", "binding_type", "network", "binding_name", "model"),
    ),
    "kubevirt_vmi_launcher_memory_overhead_bytes": (
        "Estimation of the memory amount required for virt-launcher's infrastructure "
        "components (e.g. libvirt, QEMU).",
        ("namespace", "name"),
    ),
    "kubevirt_vmi_migration_start_time_seconds": (
        "The time at which the migration started.",
        ("node", "namespace", "name", "migration_name"),
    ),
    "kubevirt_vmi_migration_end_time_seconds": (
        "The time at which the migration ended.",
        ("node", "namespace", "name", "migration_name", "status"),
    ),
}
# Binding methods as upstream's vnic labels name them (the interface's one set key).
_BINDINGS = ("bridge", "masquerade", "sriov", "slirp", "macvtap", "passt")


def _quantity(raw: object) -> Quantity | None:
    if raw is None:
        return None
    try:
        return Quantity.parse(raw)
    except QuantityError:
        return None


def _named(obj: RawObject) -> dict[str, str]:
    m = meta(obj)
    return {"name": str(m.get("name") or ""), "namespace": str(m.get("namespace") or "")}


def _domain(template_spec: Mapping[str, Any]) -> Mapping[str, Any]:
    return mapping(template_spec.get("domain"))


def _resources(obj: RawObject, spec: Mapping[str, Any]) -> list[Sample]:
    """upstream's collect{Memory,CPU}Resource{Requests,Limits} and the allocated values."""
    ids = _named(obj)
    domain = _domain(spec)
    resources = mapping(domain.get("resources"))
    requests, limits = mapping(resources.get("requests")), mapping(resources.get("limits"))
    memory, cpu = mapping(domain.get("memory")), domain.get("cpu")
    out: list[Sample] = []

    def request(resource: str, unit: str, source: str, value: float) -> None:
        labels = {**ids, "resource": resource, "unit": unit, "source": source}
        out.append(Sample("kubevirt_vm_resource_requests", labels, value))

    def limit(resource: str, unit: str, value: float) -> None:
        out.append(
            Sample(
                "kubevirt_vm_resource_limits", {**ids, "resource": resource, "unit": unit}, value
            )
        )

    memory_request = _quantity(requests.get("memory"))
    if memory_request is not None and memory_request.to_int():
        request("memory", "bytes", "domain", memory_request.to_int())
    guest = _quantity(memory.get("guest"))
    if guest is not None and guest.to_int():
        request("memory", "bytes", "guest", guest.to_int())
    page = _quantity(mapping(memory.get("hugepages")).get("pageSize"))
    if page is not None:
        request("memory", "bytes", "hugepages", page.to_int())
    memory_limit = _quantity(limits.get("memory"))
    if memory_limit is not None and memory_limit.to_int():
        limit("memory", "bytes", memory_limit.to_int())
    cpu_spec = mapping(cpu)
    for part in ("cores", "threads", "sockets"):
        count = cpu_spec.get(part)
        if isinstance(count, int) and count:
            request("cpu", part, "domain", count)
    cpu_request = _quantity(requests.get("cpu"))
    if cpu_request is not None and cpu_request.to_milli():
        request("cpu", "cores", "requests", cpu_request.to_milli() / 1000)
    elif cpu is None:
        for part in ("cores", "threads", "sockets"):
            request("cpu", part, "default", 1)
    cpu_limit = _quantity(limits.get("cpu"))
    if cpu_limit is not None and cpu_limit.to_milli():
        limit("cpu", "cores", cpu_limit.to_milli() / 1000)
    vcpus = 1
    if cpu is not None:
        vcpus = 1
        for part in ("cores", "threads", "sockets"):
            count = cpu_spec.get(part)
            vcpus *= count if isinstance(count, int) and count > 0 else 1
    request("cpu", "cores", "guest_effective", vcpus)
    effective = guest if guest is not None and guest.to_int() else memory_request
    if effective is not None and effective.to_int():
        request("memory", "bytes", "guest_effective", effective.to_int())
    return out


def _vnics(obj: RawObject, spec: Mapping[str, Any], metric: str) -> list[Sample]:
    ids = _named(obj)
    networks = {str(n.get("name")): n for n in spec.get("networks") or () if isinstance(n, Mapping)}
    out = []
    for iface in _domain(spec).get("devices", {}).get("interfaces") or ():
        if not isinstance(iface, Mapping):
            continue
        name = str(iface.get("name") or "")
        binding = next((b for b in _BINDINGS if b in iface), "")
        plugin = mapping(iface.get("binding")).get("name")
        network = mapping(networks.get(name))
        source = "pod networking" if "pod" in network else ""
        if "multus" in network:
            source = str(mapping(network.get("multus")).get("networkName") or "")
        labels = {
            **ids,
            "vnic_name": name,
            "binding_type": "plugin" if plugin else (binding or "none"),
            "network": source,
            "binding_name": str(plugin or binding or "none"),
            "model": str(iface.get("model") or "virtio"),
        }
        out.append(Sample(metric, labels, 1))
    return out


def _status_group(status: str) -> str:
    for group, members in _STATUS_GROUPS:
        if status in members:
            return group
    return "error"


def vm_samples(vm: RawObject) -> list[Sample]:
    """Every series upstream's VM collector reports for ``vm``."""
    ids = _named(vm)
    status = mapping(vm.get("status"))
    raw_template = mapping(mapping(vm.get("spec")).get("template"))
    template = mapping(raw_template.get("spec"))
    out: list[Sample] = []
    created = parse_time(meta(vm).get("creationTimestamp"))
    if created is not None:
        out.append(Sample("kubevirt_vm_create_date_timestamp_seconds", ids, created.timestamp()))
    current = _status_group(str(status.get("printableStatus") or ""))
    latest = 0.0  # upstream's -1 for "no such condition", kept at 0 for a counter
    for cond in status.get("conditions") or ():
        if isinstance(cond, Mapping) and cond.get("type") in _TRANSITION_CONDITIONS:
            when = parse_time(cond.get("lastTransitionTime"))
            if when is not None:
                latest = max(latest, float(int(when.timestamp())))
    for group, _ in _STATUS_GROUPS:
        out.append(Sample(_TRANSITION.format(group), ids, latest if group == current else 0.0))
    if raw_template:
        out += _resources(vm, template)
        out += _vnics(vm, template, "kubevirt_vm_vnic_info")
    return out


def vmi_samples(vmi: RawObject) -> list[Sample]:
    """The per-VMI series of upstream's VMI collector (info and non-evictable are kept by
    ControllerMetrics, which the VMI controller feeds)."""
    ids = _named(vmi)
    status = mapping(vmi.get("status"))
    node = str(status.get("nodeName") or "")
    out = []
    for iface in status.get("interfaces") or ():
        if not isinstance(iface, Mapping):
            continue
        addresses = [a for a in iface.get("ipAddresses") or () if a] or (
            [iface["ipAddress"]] if iface.get("ipAddress") else []
        )
        for address in addresses:
            labels = {
                "node": node,
                **ids,
                "network_name": str(iface.get("name") or ""),
                "address": str(address),
                "type": "InternalIP",
            }
            out.append(Sample("kubevirt_vmi_status_addresses", labels, 1))
    if status.get("phase") == "Running":
        out += _vnics(vmi, mapping(vmi.get("spec")), "kubevirt_vmi_vnic_info")
    migration = mapping(status.get("migrationState"))
    migration_name = str(migration.get("migrationUid") or "")
    start = parse_time(migration.get("startTimestamp"))
    if start is not None:
        labels = {"node": node, **ids, "migration_name": migration_name}
        out.append(Sample("kubevirt_vmi_migration_start_time_seconds", labels, start.timestamp()))
    end = parse_time(migration.get("endTimestamp"))
    if end is not None:
        outcome = "failed" if migration.get("failed") else "succeeded"
        labels = {"node": node, **ids, "migration_name": migration_name, "status": outcome}
        out.append(Sample("kubevirt_vmi_migration_end_time_seconds", labels, end.timestamp()))
    return out


def launcher_overhead(ratio: Callable[[], str | None]) -> Callable[[RawObject], int | None]:
    """The launcher pod's memory overhead for a VMI, as the VMI controller computes it
    (None for a VMI that does not load)."""

    def compute(vmi: RawObject) -> int | None:
        try:
            typed = load(VirtualMachineInstance, thaw(vmi))
        except InvalidObjectError:
            return None
        return memory_overhead(typed, ratio=ratio())

    return compute


def vmi_info_labels(vmi: RawObject, evictable: bool) -> dict[str, str]:
    """The labels of `kubevirt_vmi_info` besides node, namespace, name and phase, as
    upstream's: the VM annotations `vm.kubevirt.io/{os,workload,flavor}`, the instancetype
    and preference names, the guest agent's OS facts, the machine type, and whether the
    VMI can be evicted and runs an outdated launcher. Unknown ones are empty (Prometheus
    treats an empty label as absent, as upstream leaves it out)."""
    m, status = meta(vmi), mapping(vmi.get("status"))
    annotations = mapping(m.get("annotations"))
    guest = mapping(status.get("guestOSInfo"))
    return {
        "os": str(annotations.get("vm.kubevirt.io/os") or ""),
        "workload": str(annotations.get("vm.kubevirt.io/workload") or ""),
        "flavor": str(annotations.get("vm.kubevirt.io/flavor") or ""),
        "instance_type": str(
            annotations.get(INSTANCETYPE_ANNOTATION)
            or annotations.get(CLUSTER_INSTANCETYPE_ANNOTATION)
            or ""
        ),
        "preference": str(
            annotations.get(PREFERENCE_ANNOTATION)
            or annotations.get(CLUSTER_PREFERENCE_ANNOTATION)
            or ""
        ),
        "guest_os_kernel_release": str(guest.get("kernelRelease") or ""),
        "guest_os_machine": str(mapping(status.get("machine")).get("type") or ""),
        "guest_os_arch": str(guest.get("machine") or ""),
        "guest_os_name": str(guest.get("name") or ""),
        "guest_os_version_id": str(guest.get("versionId") or ""),
        "evictable": "true" if evictable else "false",
        "outdated": "true" if OUTDATED_LAUNCHER_LABEL in mapping(m.get("labels")) else "false",
    }


class CacheCollector:
    """Writes the samples of the cached VMs and VMIs into ``registry`` at each scrape."""

    def __init__(
        self,
        registry: MetricsRegistry,
        vms: Callable[[], Iterable[RawObject]],
        vmis: Callable[[], Iterable[RawObject]],
        overhead: Callable[[RawObject], int | None] = lambda _vmi: None,
    ) -> None:
        self.vms = vms
        self.vmis = vmis
        #: The launcher memory overhead the controller computes for a VMI without a
        #: recorded one (status.memory.memoryOverhead), as upstream's fallback.
        self.overhead = overhead
        self._metrics: dict[str, Counter | Gauge] = {
            name: registry.gauge(name, doc, list(labels)) for name, (doc, labels) in _GAUGES.items()
        }
        self._outdated = registry.gauge(
            "kubevirt_vmi_number_of_outdated",
            "Indication for the total number of VirtualMachineInstance workloads that are not "
            "running within the most up-to-date version of the virt-launcher environment.",
        )
        for group, doc in _TRANSITION_HELP.items():
            name = _TRANSITION.format(group)
            self._metrics[name] = registry.counter(name, doc, ["name", "namespace"])

    def _overhead(self, vmi: RawObject) -> Sample | None:
        recorded = _quantity(
            mapping(mapping(vmi.get("status")).get("memory")).get("memoryOverhead")
        )
        value = recorded.to_int() if recorded is not None else self.overhead(vmi)
        if value is None:
            return None
        return Sample("kubevirt_vmi_launcher_memory_overhead_bytes", _named(vmi), value)

    def clear(self) -> None:
        """Drop every series (the caches are gone: leadership ended)."""
        for metric in self._metrics.values():
            metric.clear()

    def collect(self) -> None:
        """Replace every series with what the caches hold now."""
        self.clear()
        vmis = list(self.vmis())
        samples = [s for vm in self.vms() for s in vm_samples(vm)]
        samples += [s for vmi in vmis for s in vmi_samples(vmi)]
        samples += [s for vmi in vmis if (s := self._overhead(vmi)) is not None]
        for sample in samples:
            metric = self._metrics[sample.metric]
            if isinstance(metric, Counter):
                metric.set_total(sample.labels, sample.value)
            else:
                metric.set(sample.labels, sample.value)
        outdated = sum(
            1 for vmi in vmis if OUTDATED_LAUNCHER_LABEL in (meta(vmi).get("labels") or {})
        )
        self._outdated.set(None, outdated)
