"""Group/version/resource coordinates and the REST paths they map to."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

__all__ = [
    "CONFIGMAPS",
    "EVENTS",
    "LEASES",
    "NODES",
    "PODS",
    "VIRTUAL_MACHINES",
    "VIRTUAL_MACHINE_INSTANCES",
    "Resource",
]


@dataclass(frozen=True, slots=True)
class Resource:
    """A REST resource: any built-in or CRD kind addressed by group/version/plural."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str | None = None
    ) -> str:
        """The URL path; `namespace=None` on a namespaced resource means all namespaces."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{quote(namespace, safe='')}"
        elif not self.namespaced and namespace:
            raise ValueError(f"{self.plural} is cluster-scoped; namespace must be empty")
        base += f"/{self.plural}"
        if name is not None:
            if not name:
                raise ValueError("name must not be empty")
            base += f"/{quote(name, safe='')}"
            if subresource:
                base += f"/{subresource}"
        elif subresource:
            raise ValueError("a subresource needs an object name")
        return base


CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap")
PODS = Resource("", "v1", "pods", "Pod")
NODES = Resource("", "v1", "nodes", "Node", namespaced=False)
EVENTS = Resource("", "v1", "events", "Event")
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease")
VIRTUAL_MACHINE_INSTANCES = Resource(
    "kubevirt.io", "v1", "virtualmachineinstances", "VirtualMachineInstance"
)
VIRTUAL_MACHINES = Resource("kubevirt.io", "v1", "virtualmachines", "VirtualMachine")
