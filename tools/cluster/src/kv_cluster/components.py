"""The control-plane processes: each a small class with argv, health, start and stop.

`Component.ensure` is what `up` calls: it leaves a healthy process alone, waits for one
that is still starting, restarts one that stays unhealthy, and starts one that is gone.
A node module adds `Containerd`, `Kubelet`, `KubeProxy` as further subclasses.
"""

from __future__ import annotations

import errno
import json
import socket
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path

from kv_cluster.audit import AUDIT_MAX_BACKUPS, AUDIT_MAX_MB, audit_policy
from kv_cluster.config import ClusterConfig
from kv_cluster.credentials import FRONT_PROXY_CLIENT_CN, Credentials
from kv_cluster.health import Health, TlsClient, probe, wait_until
from kv_cluster.layout import StateLayout
from kv_cluster.plan import APISERVER, CONTROLLER_MANAGER, ETCD, SCHEDULER
from kv_cluster.process import ProcessRecord, spawn_daemon, stop_process

__all__ = [
    "ClusterContext",
    "Component",
    "ComponentError",
    "ComponentStatus",
    "Etcd",
    "KubeApiserver",
    "KubeControllerManager",
    "KubeScheduler",
    "control_plane",
]


class ComponentError(RuntimeError):
    """A component could not be started or made healthy; the message names its log."""


@dataclass(frozen=True)
class ClusterContext:
    """What every component needs: settings, file layout, TLS material and binaries."""

    config: ClusterConfig
    layout: StateLayout
    credentials: Credentials
    kubernetes_bin: Path
    etcd_binary: Path


@dataclass(frozen=True)
class ComponentStatus:
    """One line of `kv-cluster status`."""

    name: str
    pid: int | None
    running: bool
    health: Health


def _port_taken(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # Like Go's listeners, so a port in TIME_WAIT after a kill does not count as taken.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return True
            raise
    return False


def _log_tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join("    " + line for line in text[-lines:])


class Component(ABC):
    """One daemon of the cluster."""

    name: str
    startup_timeout: float = 30.0
    #: What must be up before this starts, and what it brings (kv_cluster.plan).
    requires: frozenset[str] = frozenset()
    provides: frozenset[str] = frozenset()

    def __init__(self, ctx: ClusterContext) -> None:
        self.ctx = ctx

    @abstractmethod
    def argv(self) -> list[str]:
        """The full command line."""

    @abstractmethod
    def health(self) -> Health:
        """One health probe (no retries)."""

    @abstractmethod
    def listens(self) -> list[tuple[str, int]]:
        """The (address, port) pairs it binds; checked free before a start."""

    def prepare(self) -> None:  # noqa: B027 - optional hook, most components need nothing
        """Create what the process expects on disk before it starts."""

    @property
    def log(self) -> Path:
        return self.ctx.layout.log(self.name)

    def record(self) -> ProcessRecord | None:
        return ProcessRecord.load(self.ctx.layout.pidfile(self.name))

    def start(self) -> ProcessRecord:
        """Start the process detached and wait until it is healthy."""
        for host, port in self.listens():
            if _port_taken(host, port):
                raise ComponentError(
                    f"{self.name}: {host}:{port} is already in use by a process this cluster did "
                    "not start; stop it or pick other ports with KV_CLUSTER_PORT_BASE"
                )
        self.prepare()
        with self.log.open("a") as log:
            log.write(f"\n==== kv-cluster: starting {self.name} at {time.ctime()}\n")
        record = spawn_daemon(self.name, self.argv(), log=self.log, cwd=self.ctx.layout.root)
        record.save(self.ctx.layout.pidfile(self.name))
        health = wait_until(self.health, timeout=self.startup_timeout, still_running=record.alive)
        if not health.ok:
            raise ComponentError(
                f"{self.name} (pid {record.pid}) did not become healthy within "
                f"{self.startup_timeout:.0f}s: {health.detail}\n  log {self.log}:\n"
                f"{_log_tail(self.log)}"
            )
        return record

    def stop(self) -> bool:
        """Stop the recorded process (only if it is the very one we started)."""
        record = self.record()
        stopped = stop_process(record) if record is not None else False
        self.ctx.layout.pidfile(self.name).unlink(missing_ok=True)
        return stopped

    def ensure(self) -> str:
        """Make it run and be healthy; returns what was done ("running", "started", "restarted")."""
        record = self.record()
        if record is not None and record.alive():
            health = wait_until(
                self.health, timeout=self.startup_timeout, still_running=record.alive
            )
            if health.ok:
                return "running"
            stop_process(record)
            self.start()
            return "restarted"
        self.start()
        return "started" if record is None else "restarted"

    def status(self) -> ComponentStatus:
        record = self.record()
        running = record is not None and record.alive()
        health = self.health() if running else Health(False, "not running")
        return ComponentStatus(self.name, record.pid if record else None, running, health)


class Etcd(Component):
    name = "etcd"
    provides = frozenset({ETCD})
    startup_timeout = 30.0

    def argv(self) -> list[str]:
        ports = self.ctx.config.ports
        creds = self.ctx.credentials
        client = f"https://127.0.0.1:{ports.etcd_client}"
        peer = f"http://127.0.0.1:{ports.etcd_peer}"
        return [
            str(self.ctx.etcd_binary),
            "--name=default",
            f"--data-dir={self.ctx.layout.data('etcd')}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=default={peer}",
            f"--cert-file={creds.etcd_server.cert}",
            f"--key-file={creds.etcd_server.key}",
            f"--trusted-ca-file={creds.etcd_ca.paths.cert}",
            "--client-cert-auth=true",
            "--logger=zap",
            "--log-level=warn",
        ]

    def prepare(self) -> None:
        data = self.ctx.layout.data("etcd")
        data.mkdir(parents=True, exist_ok=True)
        data.chmod(0o700)

    def listens(self) -> list[tuple[str, int]]:
        ports = self.ctx.config.ports
        return [("127.0.0.1", ports.etcd_client), ("127.0.0.1", ports.etcd_peer)]

    def health(self) -> Health:
        creds = self.ctx.credentials
        tls = TlsClient(str(creds.etcd_ca.paths.cert), creds.etcd_healthcheck_client)
        return probe(
            "127.0.0.1",
            self.ctx.config.ports.etcd_client,
            "/health",
            tls,
            expect=lambda body: '"health":"true"' in body.replace(" ", ""),
        )


class KubeApiserver(Component):
    name = "kube-apiserver"
    requires = frozenset({ETCD})
    provides = frozenset({APISERVER})
    startup_timeout = 90.0

    def argv(self) -> list[str]:
        cfg = self.ctx.config
        creds = self.ctx.credentials
        return [
            str(self.ctx.kubernetes_bin / "kube-apiserver"),
            f"--bind-address={cfg.host_ip}",
            f"--secure-port={cfg.ports.apiserver}",
            f"--advertise-address={cfg.host_ip}",
            f"--etcd-servers=https://127.0.0.1:{cfg.ports.etcd_client}",
            f"--etcd-cafile={creds.etcd_ca.paths.cert}",
            f"--etcd-certfile={creds.apiserver_etcd_client.cert}",
            f"--etcd-keyfile={creds.apiserver_etcd_client.key}",
            f"--tls-cert-file={creds.apiserver.cert}",
            f"--tls-private-key-file={creds.apiserver.key}",
            f"--client-ca-file={creds.ca.paths.cert}",
            f"--kubelet-client-certificate={creds.apiserver_kubelet_client.cert}",
            f"--kubelet-client-key={creds.apiserver_kubelet_client.key}",
            f"--kubelet-certificate-authority={creds.ca.paths.cert}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={creds.service_account.cert}",
            f"--service-account-signing-key-file={creds.service_account.key}",
            f"--service-cluster-ip-range={cfg.service_cidr}",
            "--authorization-mode=Node,RBAC",
            "--enable-admission-plugins=NodeRestriction,MutatingAdmissionWebhook,"
            "ValidatingAdmissionWebhook",
            "--allow-privileged=true",
            # Aggregation layer: the apiserver proxies with the front-proxy client cert and
            # aggregated servers trust X-Remote-* headers only from that identity.
            f"--requestheader-client-ca-file={creds.front_proxy_ca.paths.cert}",
            f"--requestheader-allowed-names={FRONT_PROXY_CLIENT_CN}",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--proxy-client-cert-file={creds.front_proxy_client.cert}",
            f"--proxy-client-key-file={creds.front_proxy_client.key}",
            # Webhooks and APIServices are reached at a Service's endpoint addresses, not its
            # ClusterIP: works without kube-proxy, including endpoints on the host address.
            "--enable-aggregator-routing=true",
            # Reach kubelets at their node IP: a node's hostname would go to the host's
            # resolver, which is not ours to ask.
            "--kubelet-preferred-address-types=InternalIP",
            # Writes to KubeVirt objects and pods, for the benchmarks (kv_cluster.audit).
            f"--audit-policy-file={self._audit_policy}",
            f"--audit-log-path={self.audit_log}",
            f"--audit-log-maxsize={AUDIT_MAX_MB}",
            f"--audit-log-maxbackup={AUDIT_MAX_BACKUPS}",
            "--profiling=false",
            "--v=1",
        ]

    @property
    def audit_log(self) -> Path:
        return self.ctx.layout.log("kube-apiserver-audit")

    @property
    def _audit_policy(self) -> Path:
        return self.ctx.layout.data(self.name) / "audit-policy.json"

    def prepare(self) -> None:
        self._audit_policy.parent.mkdir(parents=True, exist_ok=True)
        self._audit_policy.write_text(json.dumps(audit_policy(), indent=1))

    def listens(self) -> list[tuple[str, int]]:
        return [(self.ctx.config.host_ip, self.ctx.config.ports.apiserver)]

    def health(self) -> Health:
        creds = self.ctx.credentials
        tls = TlsClient(str(creds.ca.paths.cert), creds.admin)
        return probe(self.ctx.config.host_ip, self.ctx.config.ports.apiserver, "/readyz", tls)


class _SecureComponent(Component):
    """kube-controller-manager and kube-scheduler share flags for serving and clients."""

    kubeconfig_user: str

    def _port(self) -> int:
        raise NotImplementedError

    def _serving(self) -> tuple[Path, Path]:
        raise NotImplementedError

    def common_flags(self) -> list[str]:
        kubeconfig = self.ctx.layout.kubeconfig(self.kubeconfig_user)
        cert, key = self._serving()
        return [
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={self._port()}",
            f"--tls-cert-file={cert}",
            f"--tls-private-key-file={key}",
            f"--client-ca-file={self.ctx.credentials.ca.paths.cert}",
            f"--requestheader-client-ca-file={self.ctx.credentials.front_proxy_ca.paths.cert}",
            # One instance per cluster: a lease would only delay a restarted process.
            "--leader-elect=false",
            "--v=1",
        ]

    def listens(self) -> list[tuple[str, int]]:
        return [("127.0.0.1", self._port())]

    def health(self) -> Health:
        creds = self.ctx.credentials
        tls = TlsClient(str(creds.ca.paths.cert), creds.admin)
        return probe("127.0.0.1", self._port(), "/healthz", tls)


class KubeControllerManager(_SecureComponent):
    name = "kube-controller-manager"
    requires = frozenset({APISERVER})
    provides = frozenset({CONTROLLER_MANAGER})
    kubeconfig_user = "controller-manager"

    def _port(self) -> int:
        return self.ctx.config.ports.controller_manager

    def _serving(self) -> tuple[Path, Path]:
        paths = self.ctx.credentials.controller_manager_serving
        return paths.cert, paths.key

    def argv(self) -> list[str]:
        cfg = self.ctx.config
        creds = self.ctx.credentials
        return [
            str(self.ctx.kubernetes_bin / "kube-controller-manager"),
            *self.common_flags(),
            f"--cluster-name={cfg.cluster_name}",
            f"--service-account-private-key-file={creds.service_account.key}",
            f"--root-ca-file={creds.ca.paths.cert}",
            f"--cluster-signing-cert-file={creds.ca.paths.cert}",
            f"--cluster-signing-key-file={creds.ca.paths.key}",
            "--use-service-account-credentials=true",
            "--controllers=*,bootstrapsigner,tokencleaner",
            "--allocate-node-cidrs=true",
            f"--cluster-cidr={cfg.pod_cidr}",
            f"--service-cluster-ip-range={cfg.service_cidr}",
        ]


class KubeScheduler(_SecureComponent):
    name = "kube-scheduler"
    requires = frozenset({APISERVER})
    provides = frozenset({SCHEDULER})
    kubeconfig_user = "scheduler"

    def _port(self) -> int:
        return self.ctx.config.ports.scheduler

    def _serving(self) -> tuple[Path, Path]:
        paths = self.ctx.credentials.scheduler_serving
        return paths.cert, paths.key

    def argv(self) -> list[str]:
        return [str(self.ctx.kubernetes_bin / "kube-scheduler"), *self.common_flags()]


def control_plane(ctx: ClusterContext) -> list[Component]:
    """The control plane in start order (stop in reverse)."""
    return [Etcd(ctx), KubeApiserver(ctx), KubeControllerManager(ctx), KubeScheduler(ctx)]
