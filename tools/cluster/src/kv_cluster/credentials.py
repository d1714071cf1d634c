"""Every CA, certificate, key and kubeconfig of the control plane, made idempotently.

Three CAs, as kubeadm keeps them apart:
- `ca`: the cluster CA. Signs serving certs and client certs of users and components;
  the apiserver trusts it for client auth (`--client-ca-file`). A node module signs
  kubelet client (`system:node:<name>`, O `system:nodes`) and serving certs with it.
- `etcd-ca`: only etcd's peers and clients, so no cluster identity can reach etcd.
- `front-proxy-ca`: the aggregation layer's request-header identity; aggregated API
  servers trust only this CA (CN `front-proxy-client`) for X-Remote-User headers.
"""

from __future__ import annotations

from dataclasses import dataclass

from kv_cluster.config import ClusterConfig
from kv_cluster.kubeconfig import write_kubeconfig
from kv_cluster.layout import StateLayout
from kv_cluster.pki import CertificateAuthority, CertPaths, service_account_keys

__all__ = ["FRONT_PROXY_CLIENT_CN", "Credentials", "ensure_credentials"]

FRONT_PROXY_CLIENT_CN = "front-proxy-client"


@dataclass(frozen=True)
class Credentials:
    """Paths of the control plane's TLS material (all under `<state>/pki`)."""

    ca: CertificateAuthority
    etcd_ca: CertificateAuthority
    front_proxy_ca: CertificateAuthority
    service_account: CertPaths  # .cert is the public key, .key the signing key
    apiserver: CertPaths
    apiserver_etcd_client: CertPaths
    apiserver_kubelet_client: CertPaths
    front_proxy_client: CertPaths
    etcd_server: CertPaths
    etcd_healthcheck_client: CertPaths
    controller_manager_serving: CertPaths
    scheduler_serving: CertPaths
    admin: CertPaths


def ensure_credentials(config: ClusterConfig, layout: StateLayout) -> Credentials:
    """Create what is missing (or no longer matches the config) and write the kubeconfigs."""
    pki = layout.pki
    ca = CertificateAuthority.load_or_create(pki, "ca", "kubevirt-py-ca")
    etcd_ca = CertificateAuthority.load_or_create(pki, "etcd-ca", "kubevirt-py-etcd-ca")
    fp_ca = CertificateAuthority.load_or_create(pki, "front-proxy-ca", "kubevirt-py-front-proxy-ca")
    loopback = ["127.0.0.1"]
    apiserver_names = [
        "localhost",
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local",
    ]
    creds = Credentials(
        ca=ca,
        etcd_ca=etcd_ca,
        front_proxy_ca=fp_ca,
        service_account=service_account_keys(pki),
        apiserver=ca.issue(
            pki,
            "apiserver",
            "kube-apiserver",
            server=True,
            dns_names=apiserver_names,
            ip_addresses=[*loopback, config.host_ip, config.kubernetes_service_ip],
        ),
        apiserver_etcd_client=etcd_ca.issue(
            pki, "apiserver-etcd-client", "kube-apiserver-etcd-client", client=True
        ),
        apiserver_kubelet_client=ca.issue(
            pki,
            "apiserver-kubelet-client",
            "kube-apiserver-kubelet-client",
            organizations=["system:masters"],
            client=True,
        ),
        front_proxy_client=fp_ca.issue(
            pki, "front-proxy-client", FRONT_PROXY_CLIENT_CN, client=True
        ),
        etcd_server=etcd_ca.issue(
            pki,
            "etcd-server",
            "etcd",
            server=True,
            client=True,
            dns_names=["localhost"],
            ip_addresses=loopback,
        ),
        etcd_healthcheck_client=etcd_ca.issue(
            pki, "etcd-healthcheck-client", "kube-etcd-healthcheck-client", client=True
        ),
        controller_manager_serving=ca.issue(
            pki,
            "controller-manager-serving",
            "kube-controller-manager",
            server=True,
            dns_names=["localhost"],
            ip_addresses=loopback,
        ),
        scheduler_serving=ca.issue(
            pki,
            "scheduler-serving",
            "kube-scheduler",
            server=True,
            dns_names=["localhost"],
            ip_addresses=loopback,
        ),
        admin=ca.issue(
            pki, "admin", "kubernetes-admin", organizations=["system:masters"], client=True
        ),
    )
    server = f"https://{config.host_ip}:{config.ports.apiserver}"
    write_kubeconfig(
        layout.admin_kubeconfig,
        cluster=config.cluster_name,
        server=server,
        ca=ca.paths.cert,
        user="kubernetes-admin",
        client=creds.admin,
    )
    for user, cn in (
        ("controller-manager", "system:kube-controller-manager"),
        ("scheduler", "system:kube-scheduler"),
    ):
        write_kubeconfig(
            layout.kubeconfig(user),
            cluster=config.cluster_name,
            server=server,
            ca=ca.paths.cert,
            user=cn,
            client=ca.issue(pki, f"{user}-client", cn, client=True),
        )
    return creds
