"""The cluster's DNS server as a component (see dnsserver.py): on the host address, port 53."""

from __future__ import annotations

import json
import socket
import sys

from kv_cluster.components import Component, ComponentError
from kv_cluster.dnswire import encode_query
from kv_cluster.health import Health
from kv_cluster.kubectl import Kubectl, KubectlError
from kv_cluster.pki import CertPaths
from kv_cluster.plan import APISERVER, DNS

__all__ = ["DNS_PORT", "ClusterDns"]

DNS_PORT = 53
DNS_USER = "kubevirt-py:cluster-dns"
# Bound to Kubernetes' own role for DNS servers (list/watch services and endpoints).
_BINDING = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "ClusterRoleBinding",
    "metadata": {"name": DNS_USER},
    "roleRef": {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "system:kube-dns",
    },
    "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": DNS_USER}],
}


class ClusterDns(Component):
    """Answers `<svc>.<ns>.svc.cluster.local` from the Service list; refuses everything else."""

    name = "cluster-dns"
    requires = frozenset({APISERVER})
    provides = frozenset({DNS})
    startup_timeout = 20.0

    def _client(self) -> CertPaths:
        pki = self.ctx.layout.pki
        return CertPaths(pki / "cluster-dns-client.crt", pki / "cluster-dns-client.key")

    def prepare(self) -> None:
        self.ctx.credentials.ca.issue(
            self.ctx.layout.pki, "cluster-dns-client", DNS_USER, client=True
        )
        try:
            Kubectl(self.ctx.layout.admin_kubeconfig).run(
                "apply", "-f", "-", stdin=json.dumps(_BINDING)
            )
        except KubectlError as exc:
            raise ComponentError(
                f"{self.name}: cannot grant it read access to Services: {exc}"
            ) from None

    def argv(self) -> list[str]:
        creds = self.ctx.credentials
        cfg = self.ctx.config
        client = self._client()
        return [
            sys.executable,
            "-m",
            "kv_cluster.dnsserver",
            f"--listen={cfg.host_ip}:{DNS_PORT}",
            f"--server=https://{cfg.host_ip}:{cfg.ports.apiserver}",
            f"--ca={creds.ca.paths.cert}",
            f"--cert={client.cert}",
            f"--key={client.key}",
        ]

    def listens(self) -> list[tuple[str, int]]:
        return []  # UDP; a clash shows as a failed start in the log

    def health(self) -> Health:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.settimeout(1.0)
            try:
                sock.sendto(
                    encode_query("kubernetes.default.svc.cluster.local"),
                    (self.ctx.config.host_ip, DNS_PORT),
                )
                reply = sock.recv(512)
            except OSError as exc:
                return Health(False, f"{type(exc).__name__}: {exc}")
        # An answer record (ANCOUNT > 0) means the Service list has been read.
        return Health(len(reply) > 7 and reply[7] > 0, f"{len(reply)} bytes")
