"""The kinds this library knows: group, versions, names and model class."""

from __future__ import annotations

from dataclasses import dataclass

from kubevirt_api.model import Model
from kubevirt_api.models import generated as g

__all__ = ["KINDS", "KindInfo", "kind_for", "kind_of_model"]


@dataclass(frozen=True)
class KindInfo:
    """One served kind. ``versions`` are the served API versions, storage version first."""

    group: str
    kind: str
    plural: str
    short_names: tuple[str, ...]
    namespaced: bool
    versions: tuple[str, ...]
    model: type[Model]

    @property
    def singular(self) -> str:
        """The lower-case singular resource name."""
        return self.kind.lower()

    @property
    def storage_version(self) -> str:
        """The version objects are stored in (the one this library's models describe)."""
        return self.versions[0]

    @property
    def api_version(self) -> str:
        """``group/version`` of the storage version."""
        return f"{self.group}/{self.storage_version}"


_CORE = ("v1", "v1alpha3")
_SNAPSHOT = ("v1beta1", "v1alpha1")

KINDS: tuple[KindInfo, ...] = (
    KindInfo(
        "kubevirt.io",
        "VirtualMachine",
        "virtualmachines",
        ("vm", "vms"),
        True,
        _CORE,
        g.VirtualMachine,
    ),
    KindInfo(
        "kubevirt.io",
        "VirtualMachineInstance",
        "virtualmachineinstances",
        ("vmi", "vmis"),
        True,
        _CORE,
        g.VirtualMachineInstance,
    ),
    KindInfo(
        "kubevirt.io",
        "VirtualMachineInstanceMigration",
        "virtualmachineinstancemigrations",
        ("vmim", "vmims"),
        True,
        _CORE,
        g.VirtualMachineInstanceMigration,
    ),
    KindInfo(
        "kubevirt.io",
        "VirtualMachineInstanceReplicaSet",
        "virtualmachineinstancereplicasets",
        ("vmirs", "vmirss"),
        True,
        _CORE,
        g.VirtualMachineInstanceReplicaSet,
    ),
    KindInfo(
        "kubevirt.io",
        "VirtualMachineInstancePreset",
        "virtualmachineinstancepresets",
        ("vmipreset", "vmipresets"),
        True,
        # Upstream still stores presets as v1alpha3; both versions are deprecated.
        ("v1alpha3", "v1"),
        g.VirtualMachineInstancePreset,
    ),
    KindInfo("kubevirt.io", "KubeVirt", "kubevirts", ("kv", "kvs"), True, _CORE, g.KubeVirt),
    KindInfo(
        "instancetype.kubevirt.io",
        "VirtualMachineInstancetype",
        "virtualmachineinstancetypes",
        ("vminstancetype", "vminstancetypes", "vmf", "vmfs"),
        True,
        ("v1beta1",),
        g.VirtualMachineInstancetype,
    ),
    KindInfo(
        "instancetype.kubevirt.io",
        "VirtualMachineClusterInstancetype",
        "virtualmachineclusterinstancetypes",
        ("vmclusterinstancetype", "vmclusterinstancetypes", "vmcf", "vmcfs"),
        False,
        ("v1beta1",),
        g.VirtualMachineClusterInstancetype,
    ),
    KindInfo(
        "instancetype.kubevirt.io",
        "VirtualMachinePreference",
        "virtualmachinepreferences",
        ("vmpref", "vmprefs", "vmp", "vmps"),
        True,
        ("v1beta1",),
        g.VirtualMachinePreference,
    ),
    KindInfo(
        "instancetype.kubevirt.io",
        "VirtualMachineClusterPreference",
        "virtualmachineclusterpreferences",
        ("vmcp", "vmcps"),
        False,
        ("v1beta1",),
        g.VirtualMachineClusterPreference,
    ),
    KindInfo(
        "migrations.kubevirt.io",
        "MigrationPolicy",
        "migrationpolicies",
        (),
        False,
        ("v1alpha1",),
        g.MigrationPolicy,
    ),
    KindInfo(
        "pool.kubevirt.io",
        "VirtualMachinePool",
        "virtualmachinepools",
        ("vmpool", "vmpools"),
        True,
        ("v1beta1", "v1alpha1"),
        g.VirtualMachinePool,
    ),
    KindInfo(
        "snapshot.kubevirt.io",
        "VirtualMachineSnapshot",
        "virtualmachinesnapshots",
        ("vmsnapshot", "vmsnapshots"),
        True,
        _SNAPSHOT,
        g.VirtualMachineSnapshot,
    ),
    KindInfo(
        "snapshot.kubevirt.io",
        "VirtualMachineSnapshotContent",
        "virtualmachinesnapshotcontents",
        ("vmsnapshotcontent", "vmsnapshotcontents"),
        True,
        _SNAPSHOT,
        g.VirtualMachineSnapshotContent,
    ),
    KindInfo(
        "snapshot.kubevirt.io",
        "VirtualMachineRestore",
        "virtualmachinerestores",
        ("vmrestore", "vmrestores"),
        True,
        _SNAPSHOT,
        g.VirtualMachineRestore,
    ),
    KindInfo(
        "export.kubevirt.io",
        "VirtualMachineExport",
        "virtualmachineexports",
        ("vmexport", "vmexports"),
        True,
        ("v1", "v1beta1"),
        g.VirtualMachineExport,
    ),
)

_BY_API: dict[tuple[str, str], KindInfo] = {
    (f"{k.group}/{version}", k.kind): k for k in KINDS for version in k.versions
}
_BY_MODEL: dict[type[Model], KindInfo] = {k.model: k for k in KINDS}


def kind_for(api_version: str, kind: str) -> KindInfo | None:
    """The kind served under ``apiVersion``/``kind``, or None if it is not one of ours."""
    return _BY_API.get((api_version, kind))


def kind_of_model(model: type[Model]) -> KindInfo | None:
    """The kind whose top-level model is ``model``, if any."""
    return _BY_MODEL.get(model)
