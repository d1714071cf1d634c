"""REST coordinates (group/version/plural) of Kubernetes kinds, and KubeVirt's own.

:class:`Resource` is the one coordinate type; kube_runtime re-exports it and adds the
built-in kinds it talks to. KubeVirt's kinds are derived from :data:`~kubevirt_api.KINDS`
(their storage version), so a group or plural is written once, in ``kinds.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from .kinds import KINDS, KindInfo

__all__ = [
    "CONTROLLER_REVISIONS",
    "KUBEVIRTS",
    "MIGRATION_POLICIES",
    "VIRTUAL_MACHINES",
    "VIRTUAL_MACHINE_CLUSTER_INSTANCETYPES",
    "VIRTUAL_MACHINE_CLUSTER_PREFERENCES",
    "VIRTUAL_MACHINE_EXPORTS",
    "VIRTUAL_MACHINE_INSTANCES",
    "VIRTUAL_MACHINE_INSTANCETYPES",
    "VIRTUAL_MACHINE_INSTANCE_MIGRATIONS",
    "VIRTUAL_MACHINE_INSTANCE_PRESETS",
    "VIRTUAL_MACHINE_INSTANCE_REPLICASETS",
    "VIRTUAL_MACHINE_POOLS",
    "VIRTUAL_MACHINE_PREFERENCES",
    "VIRTUAL_MACHINE_RESTORES",
    "VIRTUAL_MACHINE_SNAPSHOTS",
    "VIRTUAL_MACHINE_SNAPSHOT_CONTENTS",
    "Resource",
    "resource_of",
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
        """``group/version``, or just the version for the core group."""
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


# Built-in, but KubeVirt's: where a VM's instancetype and preference revisions live.
CONTROLLER_REVISIONS = Resource("apps", "v1", "controllerrevisions", "ControllerRevision")


def resource_of(info: KindInfo) -> Resource:
    """The coordinates of one of this library's kinds, at its storage version."""
    return Resource(info.group, info.storage_version, info.plural, info.kind, info.namespaced)


def _kubevirt(kind: str, group: str = "kubevirt.io") -> Resource:
    (info,) = (k for k in KINDS if k.group == group and k.kind == kind)
    return resource_of(info)


VIRTUAL_MACHINES = _kubevirt("VirtualMachine")
VIRTUAL_MACHINE_INSTANCES = _kubevirt("VirtualMachineInstance")
VIRTUAL_MACHINE_INSTANCE_MIGRATIONS = _kubevirt("VirtualMachineInstanceMigration")
VIRTUAL_MACHINE_INSTANCE_REPLICASETS = _kubevirt("VirtualMachineInstanceReplicaSet")
VIRTUAL_MACHINE_INSTANCE_PRESETS = _kubevirt("VirtualMachineInstancePreset")
VIRTUAL_MACHINE_POOLS = _kubevirt("VirtualMachinePool", "pool.kubevirt.io")
KUBEVIRTS = _kubevirt("KubeVirt")
MIGRATION_POLICIES = _kubevirt("MigrationPolicy", "migrations.kubevirt.io")
VIRTUAL_MACHINE_INSTANCETYPES = _kubevirt("VirtualMachineInstancetype", "instancetype.kubevirt.io")
VIRTUAL_MACHINE_CLUSTER_INSTANCETYPES = _kubevirt(
    "VirtualMachineClusterInstancetype", "instancetype.kubevirt.io"
)
VIRTUAL_MACHINE_PREFERENCES = _kubevirt("VirtualMachinePreference", "instancetype.kubevirt.io")
VIRTUAL_MACHINE_CLUSTER_PREFERENCES = _kubevirt(
    "VirtualMachineClusterPreference", "instancetype.kubevirt.io"
)
VIRTUAL_MACHINE_SNAPSHOTS = _kubevirt("VirtualMachineSnapshot", "snapshot.kubevirt.io")
VIRTUAL_MACHINE_SNAPSHOT_CONTENTS = _kubevirt(
    "VirtualMachineSnapshotContent", "snapshot.kubevirt.io"
)
VIRTUAL_MACHINE_RESTORES = _kubevirt("VirtualMachineRestore", "snapshot.kubevirt.io")
VIRTUAL_MACHINE_EXPORTS = _kubevirt("VirtualMachineExport", "export.kubevirt.io")
