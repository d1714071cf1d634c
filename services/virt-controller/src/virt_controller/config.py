"""The controller's settings: its flags, plus the KubeVirt CR's configuration as kubevirt_api reads it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from kubevirt_api.clusterconfig import ClusterConfig
from virt_domain.launcher_pod import LAUNCHER_DIRS

__all__ = ["DEFAULT_EXPORTER_IMAGE", "DEFAULT_LAUNCHER_IMAGE", "ControllerConfig"]

DEFAULT_LAUNCHER_IMAGE = "docker.io/kubevirt-py/virt-launcher:devel"
DEFAULT_EXPORTER_IMAGE = "docker.io/kubevirt-py/virt-exportserver:devel"


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    """What rendering and reconciling depend on; defaults are upstream's."""

    launcher_image: str = DEFAULT_LAUNCHER_IMAGE
    image_pull_policy: str = "IfNotPresent"
    #: Where virt-handler's Notify socket appears inside the launcher's sockets dir.
    notify_socket: str = LAUNCHER_DIRS.notify_socket
    #: The KubeVirt CR's configuration (stock defaults while there is no CR).
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    #: The VirtualMachineExport server's image (virt-exportserver).
    exporter_image: str = DEFAULT_EXPORTER_IMAGE

    def with_kubevirt(self, kubevirt: Mapping[str, Any] | None) -> ControllerConfig:
        """These settings with the configuration of `kubevirt` (None: no CR, unchanged)."""
        if kubevirt is None:
            return self
        return replace(self, cluster=ClusterConfig.from_kubevirt(kubevirt))
