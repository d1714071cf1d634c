"""`up`, `down` and `status` of one local cluster."""

from __future__ import annotations

import fcntl
import os
import shutil
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TextIO

from kv_cluster.common_instancetypes import CommonInstancetypes
from kv_cluster.components import ClusterContext, Component, ComponentStatus, control_plane
from kv_cluster.config import ClusterConfig, ConfigError
from kv_cluster.crds import KubevirtCrds, crds_dir
from kv_cluster.credentials import ensure_credentials
from kv_cluster.gobuild import ensure_built, kubernetes_build
from kv_cluster.hostnet import HostNetwork
from kv_cluster.kubectl import Kubectl
from kv_cluster.kubelet import Kubelet
from kv_cluster.kubevirt import kubevirt_components
from kv_cluster.kubevirt_cr import KubevirtConfig
from kv_cluster.layout import StateLayout
from kv_cluster.node import NodeSet
from kv_cluster.nodehost import check_node_host
from kv_cluster.nodes import read_node_count, write_node_count
from kv_cluster.plan import KUBEVIRT_ADMISSION, KUBEVIRT_CRDS, Step, order
from kv_cluster.prometheus import prometheus_components, want_prometheus
from kv_cluster.registry import registry_components
from kv_cluster.storage import storage_components

__all__ = ["Cluster", "ClusterError", "UpResult", "etcd_binary"]


class UpStep(Step, Protocol):
    """A step `up` runs: planned by its prerequisites, then made true."""

    def ensure(self) -> str:
        """Make it true (idempotent); returns what was done, for the progress line."""
        ...


class ClusterError(RuntimeError):
    """`up`/`down` cannot proceed; the message says why and what to do."""


@dataclass(frozen=True)
class UpResult:
    """What `up` did: per-component action, CRDs applied, and how long it took."""

    actions: dict[str, str]
    crds: list[str]
    crds_dir: Path | None
    seconds: float
    kubeconfig: Path
    build_seconds: float = 0.0


def etcd_binary(env: Mapping[str, str] | None = None) -> Path:
    """$KV_CLUSTER_ETCD, else `etcd` on PATH (Debian's etcd-server puts it in /usr/bin)."""
    env = os.environ if env is None else env
    if env.get("KV_CLUSTER_ETCD"):
        return Path(env["KV_CLUSTER_ETCD"])
    found = shutil.which("etcd") or ("/usr/bin/etcd" if Path("/usr/bin/etcd").exists() else None)
    if found is None:
        raise ClusterError("etcd is not installed; `make setup` installs Debian's etcd-server")
    return Path(found)


class Cluster:
    """One cluster, identified by its state directory."""

    def __init__(self, config: ClusterConfig, progress: TextIO = sys.stderr) -> None:
        self.config = config
        self.layout = StateLayout(config.state_dir)
        self.progress = progress

    @classmethod
    def from_env(
        cls, env: Mapping[str, str] | None = None, progress: TextIO = sys.stderr
    ) -> Cluster:
        """The cluster of $KV_CLUSTER_STATE_DIR, with its saved settings when it exists."""
        config = ClusterConfig.from_env(env)
        saved = StateLayout(config.state_dir).config
        if saved.exists():
            pinned = ClusterConfig.load(saved)
            differ = config.differences(pinned)
            if differ:
                raise ConfigError(
                    f"the cluster in {config.state_dir} was created with other settings "
                    f"({', '.join(differ)} differ); run `kv-cluster down` first or unset the "
                    "KV_CLUSTER_* variables that changed"
                )
            config = pinned
        return cls(config, progress)

    @property
    def kubeconfig(self) -> Path:
        """The admin kubeconfig (exists once `up` ran)."""
        return self.layout.admin_kubeconfig

    @property
    def exists(self) -> bool:
        return self.layout.config.exists()

    def _say(self, message: str) -> None:
        print(f"kv-cluster: {message}", file=self.progress, flush=True)

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self.layout.root.mkdir(parents=True, exist_ok=True)
        with self.layout.lock.open("a") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                self._say(f"waiting for another kv-cluster command on {self.layout.root}")
                fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _context(self, *, starting: bool = False) -> ClusterContext:
        build = kubernetes_build(self.config.kubernetes_version)
        try:
            etcd = etcd_binary()
        except ClusterError:
            # status and down never exec etcd; only a start needs it.
            if starting:
                raise
            etcd = Path("etcd")
        return ClusterContext(
            config=self.config,
            layout=self.layout,
            credentials=ensure_credentials(self.config, self.layout),
            kubernetes_bin=build.bin_dir(self.config.cache_dir),
            etcd_binary=etcd,
        )

    def components(self) -> list[Component]:
        """The control plane, in start order. Needs the state dir to exist."""
        ctx = self._context()
        return (
            control_plane(ctx)
            + registry_components(ctx)
            + NodeSet(ctx).components(build=False)
            + storage_components(ctx)
            + kubevirt_components(ctx)
            + prometheus_components(ctx)
        )

    def up(
        self,
        *,
        install: bool = True,
        nodes: int | None = None,
        kubevirt: bool = True,
        prometheus: bool = False,
    ) -> UpResult:
        """Build if needed, then run every step in the order their prerequisites give
        (kv_cluster.plan): start what is not running, apply the CRDs before anything that
        lists them. Safe to repeat. `install=False` leaves the CRDs out, which is refused
        (PlanError) when a KubeVirt component would run. `kubevirt=False` runs none of
        KubeVirt's components (as KV_CLUSTER_VIRT_API=0 KV_CLUSTER_VIRT_NODE=0 do).
        `prometheus=True` adds Prometheus (kv_cluster.prometheus), kept by later `up`s."""
        started = time.monotonic()
        build = kubernetes_build(self.config.kubernetes_version)
        build_started = time.monotonic()
        ensure_built(build, self.config.cache_dir, self.progress)
        build_seconds = time.monotonic() - build_started
        if nodes or (nodes is None and read_node_count(self.layout)):
            check_node_host()  # before any change: a missing package leaves nothing half-done
        with self._locked():
            self.layout.create()
            self.config.save(self.layout.config)
            hostnet = HostNetwork.load(self.layout.hostnet)
            hostnet.ensure_loopback_address(self.config.host_ip)
            hostnet.ensure_blackhole(self.config.service_cidr)
            actions: dict[str, str] = {}
            ctx = self._context(starting=True)
            want_prometheus(ctx, prometheus)
            # The node(s): as many as asked (the CLI asks for one by default), else as many
            # as before (none for a new cluster); nodes beyond the count are stopped and
            # their host changes undone.
            previous = NodeSet(ctx)
            count = nodes if nodes is not None else previous.count
            if previous.count > count:
                self._say(f"stopping {previous.count - count} node(s) beyond --nodes {count}")
                _stop_with_pods(previous.beyond(count), previous, keep=count)
                previous.teardown(keep=count)
                previous.forget(keep=count)
            write_node_count(self.layout, count)
            nodeset = NodeSet(ctx, count)
            directory = crds_dir()
            crds = KubevirtCrds(Kubectl(self.kubeconfig), directory) if install else None
            # Refuse a plan with an unmet need before changing anything.
            order(self._plan(ctx, nodeset, crds, kubevirt=kubevirt, build=False))
            if count:
                hostnet.ensure_blackhole(self.config.pod_cidr)
                nodeset.prepare_host()
            for step in order(self._plan(ctx, nodeset, crds, kubevirt=kubevirt)):
                t0 = time.monotonic()
                action = step.ensure()
                actions[step.name] = action
                self._say(f"{step.name}: {action} ({time.monotonic() - t0:.1f}s)")
            names = crds.applied if crds is not None else []
        seconds = time.monotonic() - started
        return UpResult(actions, names, directory, seconds, self.kubeconfig, build_seconds)

    @staticmethod
    def _plan(
        ctx: ClusterContext,
        nodeset: NodeSet,
        crds: KubevirtCrds | None,
        *,
        kubevirt: bool = True,
        build: bool = True,
    ) -> list[UpStep]:
        """Every step of this `up`, before ordering: the control plane, the CRDs, the nodes,
        the KubeVirt CR (when a KubeVirt component runs), the common instancetypes (with
        the CRDs) and KubeVirt's components."""
        virt = kubevirt_components(ctx) if kubevirt else []
        # Through virt-operator, the operator installs the CRDs and the step makes the CR.
        operator = any(KUBEVIRT_CRDS in step.provides for step in virt)
        steps: list[UpStep] = [*control_plane(ctx), *registry_components(ctx, nodeset.count)]
        if crds is not None and not operator:
            steps.append(crds)
        steps += nodeset.components(build=build)
        steps += storage_components(ctx, nodeset.count)
        if crds is not None and virt and not operator:
            steps.append(KubevirtConfig(ctx))
        if crds is not None:
            kubectl = Kubectl(ctx.layout.admin_kubeconfig)
            admission = any(KUBEVIRT_ADMISSION in step.provides for step in virt)
            steps.append(
                CommonInstancetypes(
                    kubectl, after_kubevirt_cr=bool(virt), after_admission=admission
                )
            )
        return steps + virt + prometheus_components(ctx)

    def status(self) -> list[ComponentStatus]:
        """Each component's process and health, without changing anything."""
        if not self.exists:
            return []
        return [c.status() for c in self.components()]

    def host_network(self) -> dict[str, bool]:
        """The host routes/addresses this cluster added, and whether each is in place."""
        return HostNetwork.load(self.layout.hostnet).present()

    def down(self) -> list[str]:
        """Stop the processes this cluster started (by recorded PID) and remove its state."""
        root = self.layout.root
        if not root.exists():
            return []
        if not self.layout.config.exists() and any(
            p.name != self.layout.lock.name for p in root.iterdir()
        ):
            raise ClusterError(
                f"{root} holds files but no config.json: not a kv-cluster state dir; "
                "refusing to delete it"
            )
        done: list[str] = []
        with self._locked():
            if self.layout.config.exists():
                nodeset = NodeSet(self._context())
                done += _stop_with_pods(self.components(), nodeset)
                done += nodeset.teardown()
            done += HostNetwork.load(self.layout.hostnet).undo()
            shutil.rmtree(root)
        return done


def _stop_with_pods(components: list[Component], nodeset: NodeSet, keep: int = 0) -> list[str]:
    """Stop the kubelets, then kill the nodes' pods (a running kubelet restarts what is
    killed; containerd owns the shims that would otherwise outlive the cluster), then the
    other components, newest first."""
    newest_first = list(reversed(components))
    kubelets = [c for c in newest_first if isinstance(c, Kubelet)]
    done = [f"stopped {c.name}" for c in kubelets if c.stop()]
    nodeset.stop_pods(keep=keep)
    done += [f"stopped {c.name}" for c in newest_first if c not in kubelets and c.stop()]
    return done
