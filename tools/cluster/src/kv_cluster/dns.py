"""The cluster's DNS server as a component (see dnsserver.py): on the host address, port 53."""

from __future__ import annotations

import socket
import sys

from kv_cluster.components import Component
from kv_cluster.dnsserver import encode_query
from kv_cluster.health import Health

__all__ = ["DNS_PORT", "ClusterDns"]

DNS_PORT = 53


class ClusterDns(Component):
    """Answers `<svc>.<ns>.svc.cluster.local` from the Service list; refuses everything else."""

    name = "cluster-dns"
    startup_timeout = 20.0

    def argv(self) -> list[str]:
        creds = self.ctx.credentials
        cfg = self.ctx.config
        return [
            sys.executable,
            "-m",
            "kv_cluster.dnsserver",
            f"--listen={cfg.host_ip}:{DNS_PORT}",
            f"--server=https://{cfg.host_ip}:{cfg.ports.apiserver}",
            f"--ca={creds.ca.paths.cert}",
            f"--cert={creds.admin.cert}",
            f"--key={creds.admin.key}",
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
