"""`virtctl create instancetype` and `virtctl create preference` (upstream's flags)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kubevirt_api.admission.instancetype import PREFERRED_TOPOLOGIES

from virtctl.creating.params import FlagError, check_quantity, parse_params, random_suffix

__all__ = ["InstancetypeOptions", "PreferenceOptions", "build_instancetype", "build_preference"]

_API_VERSION = "instancetype.kubevirt.io/v1beta1"
_IO_THREADS_POLICIES = ("auto", "shared")
# Upstream still accepts the deprecated prefer* spellings of a preferred topology.
_TOPOLOGIES = (
    *PREFERRED_TOPOLOGIES,
    *(f"prefer{t.capitalize()}" for t in PREFERRED_TOPOLOGIES),
)


@dataclass(frozen=True)
class InstancetypeOptions:
    """The flags of `create instancetype`; None means not given."""

    cpu: int
    memory: str
    name: str | None = None
    namespace: str | None = None
    namespaced: bool = False
    gpus: Sequence[str] = field(default_factory=tuple)
    host_devices: Sequence[str] = field(default_factory=tuple)
    io_threads_policy: str | None = None


@dataclass(frozen=True)
class PreferenceOptions:
    """The flags of `create preference`; None means not given."""

    name: str | None = None
    namespace: str | None = None
    namespaced: bool = False
    cpu_topology: str | None = None
    volume_storage_class: str | None = None
    machine_type: str | None = None


def _metadata(
    name: str | None, namespace: str | None, namespaced: bool, prefix: str
) -> tuple[str, dict[str, str]]:
    """(kind prefix, metadata): an explicit namespace (-n) makes the object namespaced."""
    namespaced = namespaced or namespace is not None
    generated = (
        f"{prefix}-{random_suffix()}" if namespaced else f"cluster{prefix}-{random_suffix()}"
    )
    metadata = {"name": name if name is not None else generated}
    if namespace is not None:
        metadata["namespace"] = namespace
    return ("" if namespaced else "Cluster"), metadata


def _devices(flag: str, values: Sequence[str]) -> list[dict[str, str]]:
    devices = []
    for value in values:
        params = parse_params(flag, value, {"name": "str", "devicename": "str"})
        if not params.get("name"):
            raise FlagError(flag, "name must be specified")
        if not params.get("devicename"):
            raise FlagError(flag, "deviceName must be specified")
        devices.append({"deviceName": str(params["devicename"]), "name": str(params["name"])})
    return devices


def build_instancetype(options: InstancetypeOptions) -> dict[str, Any]:
    """A VirtualMachine(Cluster)Instancetype: guest CPUs and memory, GPUs, host devices,
    IOThreads policy. Raises FlagError for a bad value."""
    if options.cpu <= 0:
        raise FlagError("cpu", "cpu value must be greater than zero")
    check_quantity("memory", options.memory)
    cluster, metadata = _metadata(
        options.name, options.namespace, options.namespaced, "instancetype"
    )
    spec: dict[str, Any] = {"cpu": {"guest": options.cpu}, "memory": {"guest": options.memory}}
    if options.gpus:
        spec["gpus"] = _devices("gpu", options.gpus)
    if options.host_devices:
        spec["hostDevices"] = _devices("hostdevice", options.host_devices)
    if options.io_threads_policy is not None:
        if options.io_threads_policy not in _IO_THREADS_POLICIES:
            raise FlagError("iothreadspolicy", "IOThread must be of value auto or shared")
        spec["ioThreadsPolicy"] = options.io_threads_policy
    return {
        "apiVersion": _API_VERSION,
        "kind": f"VirtualMachine{cluster}Instancetype",
        "metadata": metadata,
        "spec": spec,
    }


def build_preference(options: PreferenceOptions) -> dict[str, Any]:
    """A VirtualMachine(Cluster)Preference: preferred CPU topology, storage class,
    machine type. Raises FlagError for a bad value."""
    cluster, metadata = _metadata(options.name, options.namespace, options.namespaced, "preference")
    spec: dict[str, Any] = {}
    if options.cpu_topology is not None:
        if options.cpu_topology not in _TOPOLOGIES:
            raise FlagError(
                "cpu-topology",
                f'CPU topology "{options.cpu_topology}" is not supported; use one of '
                + ", ".join(PREFERRED_TOPOLOGIES),
            )
        spec["cpu"] = {"preferredCPUTopology": options.cpu_topology}
    if options.machine_type is not None:
        spec["machine"] = {"preferredMachineType": options.machine_type}
    if options.volume_storage_class is not None:
        spec["volumes"] = {"preferredStorageClassName": options.volume_storage_class}
    return {
        "apiVersion": _API_VERSION,
        "kind": f"VirtualMachine{cluster}Preference",
        "metadata": metadata,
        "spec": spec,
    }
