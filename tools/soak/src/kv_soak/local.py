"""The seams of the soak on the local cluster (kv-cluster, KubeVirt as pods, on this host).

- `ApiObserver`: the soak namespace's VMs, VMIs and launcher pods through the API, and
  the host's QEMU processes (each attributed to a pod by its cgroup).
- `ApiActions`: VM create/delete through the API, the lifecycle actions through
  virt-api's subresources (as virtctl calls them).
- `ClusterInjector`: SIGKILL by PID. The control plane and the kubelets are host
  processes kv-cluster started (their PIDs in its run records); they have no supervisor,
  so the soak starts them again as `kv-cluster up` does (`Component.ensure`). KubeVirt's
  components are pods: the container's main process, found through the node's containerd
  (`ctr tasks ls`), is killed and the kubelet restarts it.
- `ApiserverMetrics`: the API server's /metrics.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import signal
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiohttp
from kube_runtime import (
    LEASES,
    PODS,
    VIRTUAL_MACHINE_INSTANCES,
    VIRTUAL_MACHINES,
    ApiError,
    Clock,
    KubeClient,
)
from kubevirt_api.migrations import MIGRATION_JOB_LABEL
from kv_cluster import ClusterContext, Component, ComponentError, control_plane
from kv_cluster.kubelet import Kubelet
from kv_cluster.kubevirt_pods import PodHandler
from kv_cluster.node import NodeSet
from kv_cluster.nodes import NodeSpec

from kv_soak.churn import VMI_ACTIONS, Action, ActionError
from kv_soak.faults import Kill, NoTargetError, Target
from kv_soak.guest import vm_manifest
from kv_soak.model import QemuView, Snapshot, Uid, pod_view, vm_view, vmi_view

__all__ = [
    "KUBEVIRT_NAMESPACE",
    "LAUNCHER_SELECTOR",
    "SOAK_LABEL",
    "ApiActions",
    "ApiObserver",
    "ApiserverMetrics",
    "ClusterInjector",
    "main_process",
    "parse_ctr_tasks",
    "qemu_view",
    "scan_qemus",
]

KUBEVIRT_NAMESPACE = "kubevirt"
LAUNCHER_SELECTOR = "kubevirt.io=virt-launcher"
#: On the soak's namespaces and VMs; only a namespace with it is ever deleted.
SOAK_LABEL = "kubevirt-py.io/soak"
_SUBRESOURCES = "/apis/subresources.kubevirt.io/v1"
_POD_UID = re.compile(
    r"/pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})"
)
_GUEST = re.compile(r"guest=([^,\s]+)")
_SHELLS = frozenset({"sh", "bash", "dash"})
_PROC = Path("/proc")


async def _items(client: KubeClient, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
    body = await client.list(*args, **kwargs)
    return list(body.get("items") or [])


# -- observing ------------------------------------------------------------------------


def qemu_view(pid: int, cmdline: Sequence[str], cgroup: str) -> QemuView | None:
    """A guest's QEMU process from its argv and /proc/<pid>/cgroup text (None: not one).

    libvirtd also runs short-lived QEMUs of its own, to probe capabilities
    (`-machine none`, no `-name guest=`): they run no guest and are not counted."""
    if not cmdline or "qemu-system" not in Path(cmdline[0]).name:
        return None
    guest = next((m.group(1) for arg in cmdline if (m := _GUEST.search(arg))), "")
    if not guest:
        return None
    found = _POD_UID.search(cgroup)
    pod = Uid(found.group(1).replace("_", "-")) if found else None
    return QemuView(pid, pod, guest)


def scan_qemus(proc: Path = _PROC) -> tuple[QemuView, ...]:
    """Every QEMU on this host (blocking: run it in a thread)."""
    found = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if not (entry / "comm").read_text().startswith("qemu-system"):
                continue
            argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
            cgroup = (entry / "cgroup").read_text()
        except OSError:
            continue
        view = qemu_view(int(entry.name), [a for a in argv if a], cgroup)
        if view is not None:
            found.append(view)
    return tuple(found)


class ApiObserver:
    def __init__(
        self, client: KubeClient, namespace: str, clock: Clock, *, scan_host: bool = True
    ) -> None:
        self.client = client
        self.namespace = namespace
        self.clock = clock
        self.scan_host = scan_host

    async def snapshot(self) -> Snapshot:
        mono, wall = self.clock.monotonic(), self.clock.now().timestamp()
        vms, vmis, pods = await asyncio.gather(
            _items(self.client, VIRTUAL_MACHINES, self.namespace),
            _items(self.client, VIRTUAL_MACHINE_INSTANCES, self.namespace),
            _items(self.client, PODS, self.namespace, label_selector=LAUNCHER_SELECTOR),
        )
        qemus = await asyncio.to_thread(scan_qemus) if self.scan_host else None
        return Snapshot(
            monotonic=mono,
            wall=wall,
            vms={v.name: v for v in map(vm_view, vms)},
            vmis={v.name: v for v in map(vmi_view, vmis)},
            pods=tuple(map(pod_view, pods)),
            qemus=qemus,
        )


# -- acting -----------------------------------------------------------------------------


class ApiActions:
    """The churn's actions: the soak's own VMs (masquerade, so they may migrate)."""

    def __init__(self, client: KubeClient, namespace: str) -> None:
        self.client = client
        self.namespace = namespace

    async def act(self, name: str, action: Action, run_strategy: str) -> None:
        try:
            if action is Action.CREATE:
                manifest = vm_manifest(name, run_strategy, binding="masquerade")
                manifest["metadata"]["labels"] = {SOAK_LABEL: "true"}
                await self.client.create(VIRTUAL_MACHINES, manifest, self.namespace)
            elif action is Action.DELETE:
                await self.client.delete(VIRTUAL_MACHINES, name, self.namespace)
            else:
                kind = "virtualmachineinstances" if action in VMI_ACTIONS else "virtualmachines"
                path = f"{_SUBRESOURCES}/namespaces/{self.namespace}/{kind}/{name}/{action.value}"
                await self.client.request(
                    "PUT", path, body={}, verb="update", resource=f"{kind}/{action.value}"
                )
        except ApiError as error:
            raise ActionError(error.message.strip(), error.status) from error
        except (aiohttp.ClientError, TimeoutError, OSError) as error:
            raise ActionError(f"{type(error).__name__}: {error}") from error


class ApiserverMetrics:
    def __init__(self, client: KubeClient) -> None:
        self.client = client

    async def apiserver_metrics(self) -> str:
        raw = await self.client.request_bytes("GET", "/metrics", verb="get", resource="metrics")
        return raw.decode(errors="replace")


# -- killing ----------------------------------------------------------------------------


def parse_ctr_tasks(text: str) -> dict[str, int]:
    """`ctr tasks ls` output: task (container) id -> the PID of its main process."""
    tasks = {}
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 2 and fields[1].isdigit():
            tasks[fields[0]] = int(fields[1])
    return tasks


def main_process(pid: int, proc: Path = _PROC) -> int:
    """The program a container runs: its init, or when that is a shell wrapper (the
    handler's `sh -c 'python3 … | tee'`), the Python process under it."""
    try:
        if (proc / str(pid) / "comm").read_text().strip() not in _SHELLS:
            return pid
        children = (proc / str(pid) / "task" / str(pid) / "children").read_text().split()
    except OSError:
        return pid
    for child in children:
        try:
            if (proc / child / "comm").read_text().startswith("python"):
                return int(child)
        except OSError:
            continue
    return pid


def _ready(pod: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def _container_id(pod: dict[str, Any], container: str | None = None) -> str:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if container is None or status.get("name") == container:
            return str(status.get("containerID") or "").partition("://")[2]
    return ""


class ClusterInjector:
    """Kills on the local cluster of `ctx`; `namespace` holds the soak's launcher pods."""

    def __init__(self, ctx: ClusterContext, client: KubeClient, namespace: str) -> None:
        self.ctx = ctx
        self.client = client
        self.namespace = namespace
        self.nodes: dict[str, NodeSpec] = {n.name: n for n in NodeSet(ctx).specs}
        #: What each kill needs to recover: the host component, or the pod's identity.
        self._components: dict[int, Component] = {}
        self._pods: dict[int, tuple[str, str, str, NodeSpec]] = {}
        self._last_error = ""

    # Host processes: the control plane and the kubelets.
    def _host_components(self, target: Target) -> list[Component]:
        if target is Target.KUBELET:
            return [c for c in NodeSet(self.ctx).components(build=False) if isinstance(c, Kubelet)]
        return [c for c in control_plane(self.ctx) if c.name == target.value]

    async def kill(self, target: Target, rng: random.Random) -> Kill:
        if target in (Target.ETCD, Target.KUBE_APISERVER, Target.KUBELET):
            return await self._kill_host(target, rng)
        return await self._kill_pod(target, rng)

    def _running_host_components(self, target: Target) -> list[Component]:
        return [c for c in self._host_components(target) if (r := c.record()) and r.alive()]

    async def _kill_host(self, target: Target, rng: random.Random) -> Kill:
        # Files and /proc are read in a thread; the random choice stays on the loop, so
        # a seed replays the same choices.
        running = await asyncio.to_thread(self._running_host_components, target)
        if not running:
            raise NoTargetError(f"no running {target.value} recorded by kv-cluster")
        component = rng.choice(running)
        record = await asyncio.to_thread(component.record)
        if record is None:
            raise NoTargetError(f"{component.name} stopped before it could be killed")
        try:
            os.kill(record.pid, signal.SIGKILL)
        except ProcessLookupError:
            raise NoTargetError(f"{component.name} exited before it could be killed") from None
        self._components[record.pid] = component
        return Kill(target, component.name, record.pid)

    async def _pods_of(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        pods = await _items(self.client, PODS, namespace, label_selector=selector)
        return [
            p
            for p in pods
            if (p.get("status") or {}).get("phase") == "Running"
            and not p["metadata"].get("deletionTimestamp")
            and _container_id(p)
        ]

    async def _leader_pod(self, pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
        try:
            lease = await self.client.get(LEASES, "virt-controller", KUBEVIRT_NAMESPACE)
        except ApiError:
            lease = {}
        holder = str((lease.get("spec") or {}).get("holderIdentity") or "")
        # The identity is <hostname>_<pid>; a pod's hostname is its name.
        leader = [p for p in pods if holder.rpartition("_")[0] == p["metadata"]["name"]]
        return leader or [p for p in pods if _ready(p)]

    async def _kill_pod(self, target: Target, rng: random.Random) -> Kill:
        container: str | None = None
        vm: str | None = None
        if target is Target.VIRT_LAUNCHER:
            namespace, container = self.namespace, "compute"
            pods = await self._pods_of(namespace, LAUNCHER_SELECTOR)
            pods = [
                p for p in pods if not (p["metadata"].get("labels") or {}).get(MIGRATION_JOB_LABEL)
            ]
        else:
            namespace = KUBEVIRT_NAMESPACE
            pods = await self._pods_of(namespace, f"kubevirt.io={target.value}")
            if target is Target.VIRT_CONTROLLER:
                pods = await self._leader_pod(pods)
        if not pods:
            raise NoTargetError(f"no running {target.value} pod")
        pod = rng.choice(sorted(pods, key=lambda p: str(p["metadata"]["name"])))
        name = str(pod["metadata"]["name"])
        node = self.nodes.get(str(pod["spec"].get("nodeName") or ""))
        if node is None:
            raise NoTargetError(f"{name} is on no node of this cluster")
        cid = _container_id(pod, container)
        tasks = await self._ctr_tasks(node)
        if cid not in tasks:
            raise NoTargetError(f"{name}: container {cid[:12]} has no task in containerd")
        pid = await asyncio.to_thread(main_process, tasks[cid])
        if target is Target.VIRT_LAUNCHER:
            vm = next(
                (
                    str(ref.get("name"))
                    for ref in pod["metadata"].get("ownerReferences") or []
                    if ref.get("kind") == "VirtualMachineInstance"
                ),
                None,
            )
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            raise NoTargetError(f"{name}: pid {pid} exited before it could be killed") from None
        self._pods[pid] = (namespace, name, cid, node)
        return Kill(target, f"{target.value} {name} on {node.name}", pid, vm)

    async def _restart(self, component: Component) -> None:
        """Not supervised: start it again as `kv-cluster up` would, once the old one is
        gone. A start refused at once (its port not yet free, its store not yet answering)
        is tried again; the caller's deadline bounds the whole."""
        for _ in range(100):  # SIGKILL takes effect within milliseconds
            record = await asyncio.to_thread(component.record)
            if record is None or not await asyncio.to_thread(record.alive):
                break
            await asyncio.sleep(0.1)
        self._last_error = ""
        while True:
            try:
                await asyncio.to_thread(component.ensure)
                return
            except ComponentError as error:
                self._last_error = str(error).splitlines()[0]
            await asyncio.sleep(1.0)

    async def _ctr_tasks(self, node: NodeSpec) -> dict[str, int]:
        proc = await asyncio.create_subprocess_exec(
            "ctr",
            "--address",
            str(node.containerd_socket),
            "-n",
            "k8s.io",
            "tasks",
            "ls",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
        out, _ = await proc.communicate()
        return parse_ctr_tasks(out.decode(errors="replace"))

    async def recover(self, kill: Kill, within: float) -> str | None:
        try:
            async with asyncio.timeout(within):
                await self._recover(kill, within)
        except TimeoutError:
            why = f": {self._last_error}" if self._last_error else ""
            return f"not back within {within:g}s{why}"
        except ComponentError as error:
            return str(error).splitlines()[0]
        return None

    async def _recover(self, kill: Kill, within: float) -> None:
        component = self._components.pop(kill.pid, None)
        if component is not None:
            await self._restart(component)
            return
        namespace, name, old, node = self._pods.pop(kill.pid)
        if kill.target is Target.VIRT_LAUNCHER:
            return  # its VMI fails; the VM's run strategy brings a new one (convergence)
        if kill.target is Target.VIRT_HANDLER:
            await asyncio.to_thread(PodHandler(self.ctx, node).ensure, within)
            return
        while True:
            await asyncio.sleep(1.0)
            try:
                pods = await _items(
                    self.client, PODS, namespace, label_selector=f"kubevirt.io={kill.target.value}"
                )
            except (ApiError, aiohttp.ClientError, OSError):
                continue
            mine = [p for p in pods if p["metadata"]["name"] == name]
            restarted = not mine or _container_id(mine[0]) not in ("", old)
            # virt-controller: only the leader is Ready, and a new leader suffices.
            if restarted and any(_ready(p) for p in pods):
                return
