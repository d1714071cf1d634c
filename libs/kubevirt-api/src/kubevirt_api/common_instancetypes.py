"""The common cluster instancetypes and preferences, as upstream's common-instancetypes
release (v1.7.0, the bundle virt-operator installs) defines them.

The facts (names, sizes, labels, annotations, preferred devices) are upstream's; the
form is ours: a series is a spec template plus its sizes, a preference is built from the
fragments the OS families share. Labels that restate the spec (cpu, memory, hugepages,
dedicatedCPUPlacement, ...) are derived from it, so the two cannot disagree.

``uv run python -m kubevirt_api.common_instancetypes`` writes
``manifests/common-instancetypes/*.yaml``; ``--check`` exits 1 when they are stale.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml

from kubevirt_api import generated_manifests

__all__ = [
    "DIRECTORY",
    "VERSION",
    "Preference",
    "Series",
    "cluster_instancetypes",
    "cluster_preferences",
    "main",
    "render_all",
    "stale_files",
]

#: The common-instancetypes release these facts come from.
VERSION: Final = "v1.7.0"
DIRECTORY: Final = Path("manifests/common-instancetypes")
_GROUP: Final = "instancetype.kubevirt.io"
_API_VERSION: Final = f"{_GROUP}/v1beta1"


def _label(key: str) -> str:
    return f"{_GROUP}/{key}"


def _merge(*fragments: Mapping[str, Any]) -> dict[str, Any]:
    """Deep merge, later fragments winning (kustomize's strategic merge for plain maps)."""
    out: dict[str, Any] = {}
    for fragment in fragments:
        for key, value in fragment.items():
            if isinstance(value, Mapping) and isinstance(out.get(key), dict):
                out[key] = _merge(out[key], value)
            else:
                out[key] = copy.deepcopy(value)
    return out


# --- instancetypes -------------------------------------------------------------------


@dataclass(frozen=True)
class Series:
    """One instancetype series (``u1``, ``cx1``, ...): what all its sizes share."""

    prefix: str
    klass: str
    display_name: str
    icon: str
    description: str
    template: Mapping[str, Any]
    #: size name -> (guest vCPUs, guest memory)
    sizes: Mapping[str, tuple[int, str]]
    #: Memory-heavy series come in a 2Mi and a 1Gi hugepages flavour (``large1gi``).
    hugepages_flavours: bool = False

    def objects(self) -> list[dict[str, Any]]:
        """Every size of this series as a VirtualMachineClusterInstancetype."""
        out = []
        for size, (cpus, memory) in self.sizes.items():
            flavours = (("", "2Mi"), ("1gi", "1Gi")) if self.hugepages_flavours else (("", None),)
            for suffix, page_size in flavours:
                spec = _merge(self.template, {"cpu": {"guest": cpus}, "memory": {"guest": memory}})
                if page_size is not None:
                    spec["memory"]["hugepages"] = {"pageSize": page_size}
                out.append(self._object(size + suffix, spec))
        return sorted(out, key=lambda o: str(o["metadata"]["name"]))

    def _object(self, size: str, spec: dict[str, Any]) -> dict[str, Any]:
        cpu, memory = spec["cpu"], spec["memory"]
        labels = {_label("class"): self.klass, _label("cpu"): str(cpu["guest"])}
        for flag in ("dedicatedCPUPlacement", "isolateEmulatorThread"):
            if cpu.get(flag):
                labels[_label(flag)] = "true"
        if "hugepages" in memory:
            labels[_label("hugepages")] = memory["hugepages"]["pageSize"]
        labels[_label("icon-pf")] = self.icon
        labels[_label("memory")] = memory["guest"]
        if "numa" in cpu:
            labels[_label("numa")] = "true"
        if "realtime" in cpu:
            labels[_label("realtime")] = "true"
        labels |= {
            _label("size"): size,
            _label("vendor"): "kubevirt.io",
            _label("version"): "1",
            _label("common-instancetypes-version"): VERSION,
        }
        return {
            "apiVersion": _API_VERSION,
            "kind": "VirtualMachineClusterInstancetype",
            "metadata": {
                "annotations": {
                    _label("description"): self.description,
                    _label("displayName"): self.display_name,
                },
                "labels": labels,
                "name": f"{self.prefix}.{size}",
            },
            "spec": spec,
        }


_DEDICATED: Final = {"dedicatedCPUPlacement": True, "isolateEmulatorThread": True}
_DPDK_ANNOTATIONS: Final = {
    "cpu-load-balancing.crio.io": "disable",
    "cpu-quota.crio.io": "disable",
    "irq-load-balancing.crio.io": "disable",
}

# The general purpose sizes: u1 and d1 have them all, o1 all but 2xmedium.
_GENERAL_SIZES: Final = {
    "nano": (1, "512Mi"),
    "micro": (1, "1Gi"),
    "small": (1, "2Gi"),
    "medium": (1, "4Gi"),
    "2xmedium": (2, "4Gi"),
    "large": (2, "8Gi"),
    "xlarge": (4, "16Gi"),
    "2xlarge": (8, "32Gi"),
    "4xlarge": (16, "64Gi"),
    "8xlarge": (32, "128Gi"),
}

SERIES: Final[tuple[Series, ...]] = (
    Series(
        "cx1",
        "compute.exclusive",
        "Compute Exclusive",
        "pficon-registry",
        "The CX Series provides exclusive compute resources for compute\n"
        "intensive applications.\n\n"
        '*CX* is the abbreviation of "Compute Exclusive".\n\n'
        "The exclusive resources are given to the compute threads of the\n"
        "VM. In order to ensure this, some additional cores (depending\n"
        "on the number of disks and NICs) will be requested to offload\n"
        "the IO threading from cores dedicated to the workload.\n"
        "In addition, in this series, the NUMA topology of the used\n"
        "cores is provided to the VM.\n\n"
        "The amount of spec.cpu.maxSockets is set to the same as\n"
        "guest cpus. This avoids KubeVirt's default behavior of\n"
        "providing extra CPUs for hotplugging, which can exceed the\n"
        "amount of available CPUs on a node and cause the VM to fail.\n\n"
        "Requirements for CX series instance types:\n"
        "- CPU manager has to be enabled.\n"
        "- Huge pages have to be available on the nodes.",
        {"cpu": {**_DEDICATED, "numa": {"guestMappingPassthrough": {}}}, "ioThreadsPolicy": "auto"},
        {
            "medium": (1, "2Gi"),
            "large": (2, "4Gi"),
            "xlarge": (4, "8Gi"),
            "2xlarge": (8, "16Gi"),
            "4xlarge": (16, "32Gi"),
            "8xlarge": (32, "64Gi"),
        },
        hugepages_flavours=True,
    ),
    Series(
        "d1",
        "dedicated.vcpu",
        "Dedicated vCPU",
        "pficon-server-group",
        "The D Series is designed for consistent and predictable performance,\n"
        "providing resources for general purpose applications.\n\n"
        '*D* is the abbreviation for "Dedicated", reflecting the use of\n'
        "dedicated CPU placement for workloads.\n\n"
        "VMs of this instance type are assigned exclusive physical CPU cores,\n"
        "avoiding CPU sharing and time-slice contention with other VMs.",
        {"cpu": dict(_DEDICATED), "ioThreadsPolicy": "auto"},
        _GENERAL_SIZES,
    ),
    Series(
        "m1",
        "memory.intensive",
        "Memory Intensive",
        "fa-memory",
        "The M Series provides resources for memory intensive\n"
        "applications.\n\n"
        '*M* is the abbreviation of "Memory".',
        {},
        {
            "large": (2, "16Gi"),
            "xlarge": (4, "32Gi"),
            "2xlarge": (8, "64Gi"),
            "4xlarge": (16, "128Gi"),
            "8xlarge": (32, "256Gi"),
        },
        hugepages_flavours=True,
    ),
    Series(
        "n1",
        "network",
        "Network",
        "pficon-network",
        "The N Series provides resources for network intensive DPDK\n"
        "applications, like VNFs.\n\n"
        '*N* is the abbreviation for "Network".\n\n'
        "This series of instancetypes requires nodes capable\n"
        "of running DPDK workloads and being marked with the respective\n"
        "node-role.kubevirt.io/worker-dpdk label as such.",
        {
            "annotations": _DPDK_ANNOTATIONS,
            "cpu": dict(_DEDICATED),
            "memory": {"hugepages": {"pageSize": "1Gi"}},
        },
        {
            "medium": (4, "4Gi"),
            "large": (4, "8Gi"),
            "xlarge": (8, "16Gi"),
            "2xlarge": (16, "32Gi"),
            "4xlarge": (32, "64Gi"),
            "8xlarge": (64, "128Gi"),
        },
    ),
    Series(
        "o1",
        "overcommitted",
        "Overcommitted",
        "pficon-virtual-machine",
        "The O Series is based on the U Series, with the only difference\n"
        "being that memory is overcommitted.\n\n"
        '*O* is the abbreviation for "Overcommitted".',
        {"memory": {"overcommitPercent": 50}},
        {k: v for k, v in _GENERAL_SIZES.items() if k != "2xmedium"},
    ),
    Series(
        "rt1",
        "realtime",
        "Realtime",
        "pficon-server-group",
        "The RT Series provides resources for realtime applications, like Oslat.\n\n"
        '*RT* is the abbreviation for "realtime".\n\n'
        "This series of instance types requires nodes capable of running\n"
        "realtime applications.",
        {
            "annotations": _DPDK_ANNOTATIONS,
            "cpu": {**_DEDICATED, "numa": {"guestMappingPassthrough": {}}, "realtime": {}},
            "memory": {"hugepages": {"pageSize": "1Gi"}},
        },
        {
            "micro": (1, "1Gi"),
            "small": (1, "2Gi"),
            "medium": (1, "4Gi"),
            "large": (2, "8Gi"),
            "xlarge": (4, "16Gi"),
            "2xlarge": (8, "32Gi"),
            "4xlarge": (16, "64Gi"),
            "8xlarge": (32, "128Gi"),
        },
    ),
    Series(
        "u1",
        "general.purpose",
        "General Purpose",
        "pficon-server-group",
        "The U Series is quite neutral and provides resources for\n"
        "general purpose applications.\n\n"
        '*U* is the abbreviation for "Universal", hinting at the universal\n'
        "attitude towards workloads.\n\n"
        "VMs of instance types will share physical CPU cores on a\n"
        "time-slice basis with other VMs.",
        {},
        _GENERAL_SIZES,
    ),
)


def _cx1_max_sockets(obj: dict[str, Any]) -> dict[str, Any]:
    # cx1 pins maxSockets to the guest count (no hotplug headroom; see its description).
    if obj["metadata"]["name"].startswith("cx1."):
        obj["spec"]["cpu"]["maxSockets"] = obj["spec"]["cpu"]["guest"]
    return obj


def cluster_instancetypes() -> list[dict[str, Any]]:
    """Every common VirtualMachineClusterInstancetype, sorted by name (fresh copies)."""
    objects = [_cx1_max_sockets(o) for series in SERIES for o in series.objects()]
    return sorted(objects, key=lambda o: str(o["metadata"]["name"]))


# --- preferences ---------------------------------------------------------------------

_LINUX_DEVICES: Final = {
    "devices": {
        "preferredDiskBus": "virtio",
        "preferredInterfaceModel": "virtio",
        "preferredRng": {},
    }
}
_DEDICATED_IO: Final = {"devices": {"preferredDiskDedicatedIoThread": True}}
_DESKTOP: Final = {
    "devices": {
        "preferredAutoattachInputDevice": True,
        "preferredInputBus": "virtio",
        "preferredInputType": "tablet",
    }
}
_DPDK: Final = {
    "cpu": {
        "preferredCPUTopology": "spread",
        "spreadOptions": {"across": "SocketsCoresThreads", "ratio": 4},
    },
    "devices": {"preferredNetworkInterfaceMultiQueue": True},
}
_REALTIME: Final = {
    "cpu": {"preferredCPUTopology": "spread", "spreadOptions": {"across": "SocketsCoresThreads"}},
    "devices": {
        "preferredAutoattachGraphicsDevice": False,
        "preferredAutoattachMemBalloon": False,
        "preferredAutoattachSerialConsole": True,
        "preferredNetworkInterfaceMultiQueue": True,
    },
}
_EFI: Final = {"firmware": {"preferredEfi": {"secureBoot": False}}}
_SECURE_BOOT: Final = {
    "features": {"preferredSmm": {}},
    "firmware": {"preferredEfi": {"secureBoot": True}},
}
_WINDOWS: Final = {
    "clock": {
        "preferredClockOffset": {"utc": {}},
        "preferredTimer": {
            "hpet": {"present": False},
            "hyperv": {},
            "pit": {"tickPolicy": "delay"},
            "rtc": {"tickPolicy": "catchup"},
        },
    },
    "cpu": {"preferredCPUTopology": "sockets"},
    "devices": {
        "preferredAutoattachInputDevice": True,
        "preferredDiskBus": "sata",
        "preferredInterfaceModel": "e1000e",
    },
    "features": {
        "preferredAcpi": {},
        "preferredApic": {},
        "preferredHyperv": {
            "frequencies": {},
            "ipi": {},
            "reenlightenment": {},
            "relaxed": {},
            "reset": {},
            "runtime": {},
            "spinlocks": {"spinlocks": 8191},
            "synic": {},
            "synictimer": {"direct": {}},
            "tlbflush": {},
            "vapic": {},
            "vpindex": {},
        },
    },
    "preferredTerminationGracePeriodSeconds": 3600,
}
_WINDOWS_VIRTIO: Final = {
    "devices": {
        "preferredDiskBus": "virtio",
        "preferredInputBus": "virtio",
        "preferredInputType": "tablet",
        "preferredInterfaceModel": "virtio",
        "preferredVideoType": "virtio",
    }
}
_WINDOWS_TPM: Final = {
    "devices": {"preferredTPM": {"persistent": True}},
    "firmware": {"preferredEfi": {"persistent": True}},
}
_E1000: Final = {"devices": {"preferredInterfaceModel": "e1000"}}
_NO_PCI_HOLE64: Final = {"annotations": {"kubevirt.io/disablePCIHole64": "true"}}


@dataclass(frozen=True)
class Preference:
    """One common VirtualMachineClusterPreference."""

    name: str
    display_name: str
    icon: str
    tags: str
    spec: Mapping[str, Any]
    os_type: str = "linux"
    #: (guest vCPUs, guest memory) the guest OS needs at least.
    requires: tuple[int, str] | None = None
    architecture: str | None = None

    def object(self) -> dict[str, Any]:
        """The VirtualMachineClusterPreference."""
        labels: dict[str, str] = {}
        if self.architecture:
            labels[_label("arch")] = self.architecture
        labels[_label("os-type")] = self.os_type
        if self.architecture:
            labels[_label("preferred-architecture")] = self.architecture
            labels[_label("required-architecture")] = self.architecture
        spec = _merge({"annotations": {"vm.kubevirt.io/os": self.os_type}}, self.spec)
        if self.architecture:
            spec["preferredArchitecture"] = self.architecture
        if self.requires:
            cpus, memory = self.requires
            labels[_label("required-cpu")] = str(cpus)
            labels[_label("required-memory")] = memory
            requirements: dict[str, Any] = {}
            if self.architecture:
                requirements["architecture"] = self.architecture
            spec["requirements"] = requirements | {
                "cpu": {"guest": cpus},
                "memory": {"guest": memory},
            }
        labels[_label("vendor")] = "kubevirt.io"
        labels[_label("common-instancetypes-version")] = VERSION
        return {
            "apiVersion": _API_VERSION,
            "kind": "VirtualMachineClusterPreference",
            "metadata": {
                "annotations": {
                    "iconClass": self.icon,
                    "openshift.io/display-name": self.display_name,
                    # Upstream's values carry literal quotes and a newline (a kustomize
                    # artefact); kept as shipped so the objects match.
                    "openshift.io/documentation-url": '"https://github.com/kubevirt/common-instancetypes"\n',
                    "openshift.io/provider-display-name": "KubeVirt",
                    "openshift.io/support-url": '"https://github.com/kubevirt/common-instancetypes/issues"\n',
                    "tags": self.tags,
                },
                "labels": labels,
                "name": self.name,
            },
            "spec": spec,
        }


def _centos(version: str) -> list[Preference]:
    name, display, tags = (
        f"centos.stream{version}",
        f"CentOS Stream {version}",
        "hidden,kubevirt,linux,centos-stream",
    )
    base = _merge(_LINUX_DEVICES, _DEDICATED_IO)
    out = [
        Preference(name, display, "icon-centos", tags, base, requires=(1, "1.5Gi")),
        Preference(
            f"{name}.desktop",
            display,
            "icon-centos",
            tags,
            _merge(base, _DESKTOP),
            requires=(1, "1.5Gi"),
        ),
    ]
    if version == "9":
        out.append(
            Preference(
                f"{name}.dpdk",
                display,
                "icon-centos",
                f"{tags},dpdk",
                _merge(base, _DPDK),
                requires=(8, "1.5Gi"),
            )
        )
    return out


def _per_architecture(
    name: str,
    display: str,
    icon: str,
    tags: str,
    spec: Mapping[str, Any],
    requires: tuple[int, str],
) -> list[Preference]:
    """amd64 (with SMM and secure boot) under the plain name, arm64 and s390x suffixed."""
    return [
        Preference(
            name,
            f"{display} (amd64)",
            icon,
            tags,
            _merge(spec, _SECURE_BOOT),
            requires=requires,
            architecture="amd64",
        ),
        *(
            Preference(
                f"{name}.{arch}",
                f"{display} ({arch})",
                icon,
                tags,
                spec,
                requires=requires,
                architecture=arch,
            )
            for arch in ("arm64", "s390x")
        ),
    ]


def _rhel() -> list[Preference]:
    tags, icon = "hidden,kubevirt,linux,rhel", "icon-rhel"
    modern = _merge(_LINUX_DEVICES, _DEDICATED_IO)
    out = [
        Preference(
            "rhel.7", "Red Hat Enterprise Linux 7", icon, tags, _LINUX_DEVICES, requires=(1, "1Gi")
        ),
        Preference(
            "rhel.7.desktop",
            "Red Hat Enterprise Linux 7",
            icon,
            tags,
            _merge(_LINUX_DEVICES, _DESKTOP),
            requires=(1, "1Gi"),
        ),
        Preference(
            "rhel.8",
            "Red Hat Enterprise Linux 8",
            icon,
            tags,
            _LINUX_DEVICES,
            requires=(1, "1.5Gi"),
        ),
        Preference(
            "rhel.8.desktop",
            "Red Hat Enterprise Linux 8",
            icon,
            tags,
            _merge(_LINUX_DEVICES, _DESKTOP),
            requires=(1, "1.5Gi"),
        ),
        Preference(
            "rhel.8.dpdk",
            "Red Hat Enterprise Linux 8",
            icon,
            f"{tags},dpdk",
            _merge(_LINUX_DEVICES, _DPDK),
            requires=(8, "1.5Gi"),
        ),
        *_per_architecture(
            "rhel.9", "Red Hat Enterprise Linux 9", icon, tags, modern, (1, "1.5Gi")
        ),
        *_per_architecture(
            "rhel.10", "Red Hat Enterprise Linux 10", icon, tags, modern, (1, "1.5Gi")
        ),
    ]
    amd64 = _merge(modern, _SECURE_BOOT)
    for variant, display, extra, fragment, requires in (
        ("desktop", "Desktop", "", _DESKTOP, (1, "1.5Gi")),
        ("dpdk", "DPDK", ",dpdk", _DPDK, (8, "1.5Gi")),
        ("realtime", "Realtime", ",realtime", _REALTIME, (4, "4Gi")),
    ):
        out.append(
            Preference(
                f"rhel.9.{variant}",
                f"Red Hat Enterprise Linux 9 {display} (amd64)",
                icon,
                tags + extra,
                _merge(amd64, fragment),
                requires=requires,
                architecture="amd64",
            )
        )
    return out


def _windows() -> list[Preference]:
    tags, icon = "hidden,kubevirt,windows", "icon-windows"
    # name suffix, display name, minimum (cpus, memory), extra fragments
    releases: tuple[tuple[str, str, tuple[int, str], tuple[Mapping[str, Any], ...]], ...] = (
        ("10", "Microsoft Windows 10", (1, "2Gi"), (_SECURE_BOOT,)),
        ("11", "Microsoft Windows 11", (2, "4Gi"), (_SECURE_BOOT, _WINDOWS_TPM)),
        ("2k12", "Microsoft Windows Server 2012/2012 R2", (1, "512Mi"), ()),
        ("2k16", "Microsoft Windows Server 2016", (1, "2Gi"), (_SECURE_BOOT,)),
        ("2k19", "Microsoft Windows Server 2019", (1, "2Gi"), (_SECURE_BOOT,)),
        ("2k22", "Microsoft Windows Server 2022", (1, "2Gi"), (_SECURE_BOOT, _WINDOWS_TPM)),
        ("2k25", "Microsoft Windows Server 2025", (1, "2Gi"), (_SECURE_BOOT, _WINDOWS_TPM)),
        ("2k8", "Microsoft Windows Server 2008/2008 R2", (1, "512Mi"), (_E1000,)),
        ("7", "Microsoft Windows 7", (1, "2Gi"), ()),
    )
    out = []
    for suffix, display, requires, extra in releases:
        spec = _merge(_WINDOWS, *extra)
        out.append(Preference(f"windows.{suffix}", display, icon, tags, spec, "windows", requires))
        out.append(
            Preference(
                f"windows.{suffix}.virtio",
                f"{display} (virtio)",
                icon,
                tags,
                _merge(spec, _WINDOWS_VIRTIO),
                "windows",
                requires,
            )
        )
    out.append(
        Preference(
            "windows.2k3",
            "Microsoft Windows Server 2003",
            icon,
            tags,
            _merge(_WINDOWS, _NO_PCI_HOLE64, {"devices": {"preferredInterfaceModel": "rtl8139"}}),
            "windows",
            (1, "256Mi"),
        )
    )
    out.append(
        Preference(
            "windows.xp",
            "Microsoft Windows XP",
            icon,
            tags,
            _merge(_WINDOWS, _NO_PCI_HOLE64),
            "windows",
            (1, "128Mi"),
        )
    )
    return out


def _preferences() -> list[Preference]:
    def plain(
        name: str, display: str, icon: str, requires: tuple[int, str], *extra: Mapping[str, Any]
    ) -> Preference:
        return Preference(
            name,
            display,
            icon,
            f"hidden,kubevirt,{name}",
            _merge(_LINUX_DEVICES, *extra),
            requires=requires,
        )

    return [
        plain("alpine", "Alpine", "icon-alpine", (1, "512Mi")),
        *_centos("10"),
        *_centos("9"),
        plain("cirros", "Cirros", "icon-cirros", (1, "256Mi")),
        plain("debian", "Debian", "icon-debian", (1, "512Mi"), _EFI),
        *_per_architecture(
            "fedora", "Fedora", "icon-fedora", "hidden,kubevirt,fedora", _LINUX_DEVICES, (1, "2Gi")
        ),
        Preference(
            "legacy",
            "Legacy Guest",
            "icon-other",
            "hidden,kubevirt,legacy",
            {"devices": {"preferredDiskBus": "sata", "preferredInterfaceModel": "e1000"}},
            "legacy",
        ),
        Preference("linux", "Linux Guest", "icon-linux", "hidden,kubevirt,linux", _LINUX_DEVICES),
        Preference(
            "linux.efi",
            "Linux EFI Guest",
            "icon-linux",
            "hidden,kubevirt,linux-efi",
            _merge(_LINUX_DEVICES, _EFI),
        ),
        Preference(
            "linux.virtiotransitional",
            "Linux Virtio Transitional Guest",
            "icon-linux",
            "hidden,kubevirt,linux-virtio-transitional",
            _merge(_LINUX_DEVICES, {"devices": {"preferredUseVirtioTransitional": True}}),
        ),
        plain("opensuse.leap", "OpenSUSE Leap", "icon-opensuse-leap", (1, "2Gi")),
        plain("opensuse.tumbleweed", "OpenSUSE Tumbleweed", "icon-opensuse-tumbleweed", (1, "2Gi")),
        plain("oraclelinux", "Oracle Linux", "icon-oracle", (2, "4Gi"), _EFI),
        *_rhel(),
        plain("sles", "SUSE Linux Enterprise Server", "icon-sles", (1, "2Gi")),
        plain("ubuntu", "Ubuntu", "icon-ubuntu", (1, "2Gi")),
        *_windows(),
    ]


def cluster_preferences() -> list[dict[str, Any]]:
    """Every common VirtualMachineClusterPreference, sorted by name (fresh copies)."""
    return sorted((p.object() for p in _preferences()), key=lambda o: str(o["metadata"]["name"]))


# --- the generated manifests ---------------------------------------------------------


def _render(objects: Sequence[Mapping[str, Any]], what: str) -> str:
    header = (
        f"# {len(objects)} {what} of common-instancetypes {VERSION}.\n"
        "# Generated by `uv run python -m kubevirt_api.common_instancetypes`; do not edit.\n"
    )
    return header + "".join(
        "---\n" + yaml.safe_dump(dict(o), sort_keys=False, width=100) for o in objects
    )


def render_all() -> dict[str, str]:
    """File name -> text of every generated manifest."""
    return {
        "virtualmachineclusterinstancetypes.yaml": _render(
            cluster_instancetypes(), "VirtualMachineClusterInstancetypes"
        ),
        "virtualmachineclusterpreferences.yaml": _render(
            cluster_preferences(), "VirtualMachineClusterPreferences"
        ),
    }


def stale_files(directory: Path) -> list[str]:
    """Files in ``directory`` that are missing, different, or no longer generated."""
    return generated_manifests.stale_files(render_all(), directory)


def main(argv: Sequence[str] | None = None) -> int:
    """Write the manifests, or with ``--check`` report stale ones (exit 1)."""
    return generated_manifests.generator_main(
        argv,
        module="kubevirt_api.common_instancetypes",
        description=__doc__,
        default_directory=DIRECTORY,
        render=render_all,
        what="common instancetypes",
    )


if __name__ == "__main__":
    raise SystemExit(main())
