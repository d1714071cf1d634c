"""The controller's settings: flags plus what the KubeVirt CR's configuration says."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from virt_domain.launcher_pod import LAUNCHER_DIRS

__all__ = ["DEFAULT_LAUNCHER_IMAGE", "ClusterConfig", "config_from_kubevirt"]

DEFAULT_LAUNCHER_IMAGE = "docker.io/kubevirt-py/virt-launcher:devel"


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    """What rendering and reconciling depend on; defaults are upstream's."""

    launcher_image: str = DEFAULT_LAUNCHER_IMAGE
    image_pull_policy: str = "IfNotPresent"
    #: developerConfiguration.useEmulation: no devices.kubevirt.io/kvm request, TCG.
    use_emulation: bool = False
    #: developerConfiguration.cpuAllocationRatio: vCPUs per requested CPU.
    cpu_allocation_ratio: int = 10
    #: developerConfiguration.memoryOvercommit (percent).
    memory_overcommit: int = 100
    #: additionalGuestMemoryOverheadRatio (a decimal string, e.g. "1.5").
    additional_overhead_ratio: str | None = None
    #: Where virt-handler's Notify socket appears inside the launcher's sockets dir.
    notify_socket: str = LAUNCHER_DIRS.notify_socket


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def config_from_kubevirt(base: ClusterConfig, kubevirt: Mapping[str, Any] | None) -> ClusterConfig:
    """`base` updated from a KubeVirt CR's spec.configuration (None: unchanged)."""
    if kubevirt is None:
        return base
    configuration = _map(_map(kubevirt.get("spec")).get("configuration"))
    developer = _map(configuration.get("developerConfiguration"))
    changes: dict[str, Any] = {}
    if isinstance(developer.get("useEmulation"), bool):
        changes["use_emulation"] = developer["useEmulation"]
    ratio = developer.get("cpuAllocationRatio")
    if isinstance(ratio, int) and not isinstance(ratio, bool) and ratio > 0:
        changes["cpu_allocation_ratio"] = ratio
    overcommit = developer.get("memoryOvercommit")
    if isinstance(overcommit, int) and not isinstance(overcommit, bool) and overcommit > 0:
        changes["memory_overcommit"] = overcommit
    extra = configuration.get("additionalGuestMemoryOverheadRatio")
    if isinstance(extra, str) and extra:
        changes["additional_overhead_ratio"] = extra
    return replace(base, **changes)
