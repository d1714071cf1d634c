"""Builds and runs a real local Kubernetes control plane for kubevirt-py.

`Cluster.from_env().up()` is what `kv-cluster up` does; the integration fixtures call the
same. A node module plugs in by subclassing `Component` and issuing its certificates with
`Credentials.ca.issue(...)`.
"""

from kv_cluster.cluster import Cluster, ClusterError, UpResult, etcd_binary
from kv_cluster.components import (
    ClusterContext,
    Component,
    ComponentError,
    ComponentStatus,
    Etcd,
    KubeApiserver,
    KubeControllerManager,
    KubeScheduler,
    control_plane,
)
from kv_cluster.config import KUBERNETES_VERSION, ClusterConfig, ConfigError, Ports
from kv_cluster.credentials import Credentials, ensure_credentials
from kv_cluster.gobuild import BuildError, GoBuild, ensure_built, kubernetes_build
from kv_cluster.health import Health, TlsClient, probe, wait_until
from kv_cluster.hostnet import HostNetError, HostNetwork
from kv_cluster.kubectl import Kubectl, KubectlError, kubectl_binary
from kv_cluster.layout import StateLayout
from kv_cluster.pki import CertificateAuthority, CertPaths
from kv_cluster.process import ProcessRecord, spawn_daemon, stop_process
from kv_cluster.registry import (
    REGISTRY_VERSION,
    Registry,
    registry_build,
    registry_endpoint,
    registry_storage,
)

__all__ = [
    "KUBERNETES_VERSION",
    "REGISTRY_VERSION",
    "BuildError",
    "CertPaths",
    "CertificateAuthority",
    "Cluster",
    "ClusterConfig",
    "ClusterContext",
    "ClusterError",
    "Component",
    "ComponentError",
    "ComponentStatus",
    "ConfigError",
    "Credentials",
    "Etcd",
    "GoBuild",
    "Health",
    "HostNetError",
    "HostNetwork",
    "KubeApiserver",
    "KubeControllerManager",
    "KubeScheduler",
    "Kubectl",
    "KubectlError",
    "Ports",
    "ProcessRecord",
    "Registry",
    "StateLayout",
    "TlsClient",
    "UpResult",
    "control_plane",
    "ensure_built",
    "ensure_credentials",
    "etcd_binary",
    "kubectl_binary",
    "kubernetes_build",
    "probe",
    "registry_build",
    "registry_endpoint",
    "registry_storage",
    "spawn_daemon",
    "stop_process",
    "wait_until",
]
