"""500 VMIs -> 500 launcher pods through virt-controller, next to a plain client creating
500 pods (printed, never judged).

Run: ``uv run python tools/bench/controller/pods.py [--count 500] [--keep]``

On a private kv-cluster (its own state dir, ports and addresses) with one Node object that
advertises KubeVirt's device resources (no kubelet: pods get bound, never run):

- plain: the bench creates N copies of a rendered launcher pod itself (20 requests in
  flight) and waits until the scheduler bound them all;
- floor: the bench creates N VMIs and, for each, the launcher pod rendered from it, then
  waits until every pod is bound: the least any VMI controller could ask of the API server
  (a VMI create, a pod create, the binding; not even the status write that says
  Scheduled), so floor / plain bounds the ratio the controller can reach on this machine;
- controller: virt-controller runs as a subprocess; the bench creates N VMIs (20 in flight)
  and waits until every VMI is Scheduled (its pod created, bound, status written back).

Printed: both elapsed times and their ratio, the CPU seconds each process of the private
cluster (kube-apiserver, etcd, the scheduler, ...), virt-controller and the bench itself
used in each phase (from /proc: who the time went to on this 2-core machine), and the API
writes per VMI up to Scheduled,
counted from kube-apiserver's own `apiserver_request_total` (POST/PUT/PATCH/DELETE/APPLY,
by resource; the fake node's lease and status renewals are left out). Completion is seen
through a watch, so the measurement adds no list load. virt-controller runs with its
defaults (10 workers per controller, client QPS 200 / burst 400, as upstream's).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import os
import re
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

from kube_runtime import (
    NODES,
    PODS,
    VIRTUAL_MACHINE_INSTANCES,
    ApiError,
    ClientSettings,
    KubeClient,
    Resource,
    RestListWatch,
    SharedInformer,
    connect,
)
from kubevirt_api import VirtualMachineInstance, load
from kubevirt_api.defaults import admitted_vmi
from kv_cluster import Cluster
from kv_cluster.kubectl import Kubectl
from kv_cluster.slots import private_env
from virt_controller.config import ControllerConfig
from virt_controller.launcher_pod import render_launcher_pod

__all__ = ["main"]

NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount")
NODE = "bench-node-0"
IN_FLIGHT = 20
ENV = private_env("controller-bench")
WRITE_VERBS = {"POST", "PUT", "PATCH", "DELETE", "APPLY"}
_SAMPLE = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\} (?P<value>\S+)$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def _vmi(name: str, namespace: str) -> dict[str, Any]:
    """A VMI as virt-api's mutating webhook (not run here) admits it: with the VMI
    controller's finalizer and phase Pending, so no controller write is spent on them."""
    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    vmi = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstance",
        "metadata": {"name": name, "namespace": namespace, "labels": {"bench": "yes"}},
        "spec": {
            "domain": {"devices": {}, "resources": {"requests": {"memory": "64Mi"}}},
            "terminationGracePeriodSeconds": 0,
        },
    }
    return admitted_vmi(vmi, stamp)


def _node(count: int = 0) -> dict[str, Any]:
    # Room for every phase's pods: the earlier ones stay while the later ones are made.
    room = str(max(5000, 3 * count))
    amounts = {"cpu": room, "memory": "64Ti", "pods": room}
    amounts.update({f"devices.kubevirt.io/{d}": room for d in ("kvm", "tun", "vhost-net")})
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": NODE,
            "labels": {"kubernetes.io/hostname": NODE, "kubevirt.io/schedulable": "true"},
        },
        "status": {
            "capacity": amounts,
            "allocatable": amounts,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "bench node",
                    "lastHeartbeatTime": now,
                    "lastTransitionTime": now,
                }
            ],
        },
    }


def _write_counts(kubectl: Kubectl) -> Counter[str]:
    """apiserver_request_total of write verbs, by resource[/subresource]."""
    text = kubectl.run("get", "--raw", "/metrics").stdout
    counts: Counter[str] = Counter()
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match is None:
            continue
        labels = dict(_LABEL.findall(match["labels"]))
        if labels.get("verb") not in WRITE_VERBS:
            continue
        resource = labels.get("resource", "")
        if labels.get("subresource"):
            resource += "/" + labels["subresource"]
        counts[resource] += int(float(match["value"]))
    return counts


async def _bounded(n: int, make: Any) -> None:
    limit = asyncio.Semaphore(IN_FLIGHT)

    async def one(i: int) -> None:
        async with limit:
            await make(i)

    await asyncio.gather(*(one(i) for i in range(n)))


async def _wait(probe: Any, within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while not await probe():
        if time.monotonic() > deadline:
            raise SystemExit(f"bench: timed out waiting for {what}")
        await asyncio.sleep(0.05)


async def _exists(client: KubeClient, resource: Resource, name: str, namespace: str) -> bool:
    try:
        await client.get(resource, name, namespace)
    except ApiError as exc:
        if exc.status == 404:
            return False
        raise
    return True


async def _count(client: KubeClient, resource: Resource, namespace: str, test: Any) -> int:
    body = await client.list(resource, namespace)
    return sum(1 for item in body["items"] if test(item))


class _Watcher:
    """Counts objects of a namespace passing `test`, from a watch (polling lists of 500
    objects would load the API server and this process during the measurement)."""

    def __init__(self, client: KubeClient, resource: Resource, namespace: str, test: Any) -> None:
        self.informer: SharedInformer[Any] = SharedInformer(
            RestListWatch(client, resource, namespace=namespace), name=resource.plural
        )
        self.test = test
        self.stop = asyncio.Event()
        self.task: asyncio.Future[None] | None = None

    async def __aenter__(self) -> _Watcher:
        self.task = asyncio.ensure_future(self.informer.run(self.stop))
        await self.informer.wait_for_sync(60)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.stop.set()
        if self.task is not None:
            await self.task

    async def reached(self, count: int) -> bool:
        return sum(1 for o in self.informer.store.objects() if self.test(o)) >= count


async def _keep_node_ready(client: KubeClient, stop: asyncio.Event) -> None:
    while not stop.is_set():
        with contextlib.suppress(ApiError, OSError, TimeoutError):
            await client.merge_patch(
                NODES,
                NODE,
                {"status": {"conditions": _node()["status"]["conditions"]}},
                subresource="status",
            )
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 10)


async def run(count: int, kubeconfig: Path, kubectl: Kubectl, profile: Path | None = None) -> None:
    client = await connect(kubeconfig, settings=ClientSettings(qps=1000, burst=1000))
    async with client:
        with contextlib.suppress(ApiError):
            await client.create(NODES, _node(count))
        await client.merge_patch(
            NODES, NODE, {"status": _node(count)["status"]}, subresource="status"
        )
        stop = asyncio.Event()
        ready = asyncio.ensure_future(_keep_node_ready(client, stop))
        suffix = str(int(time.time()))
        plain_ns, floor_ns = f"bench-plain-{suffix}", f"bench-floor-{suffix}"
        ctl_ns = f"bench-ctl-{suffix}"
        for ns in (plain_ns, floor_ns, ctl_ns):
            await client.create(NAMESPACES, {"metadata": {"name": ns}})
        # Pods are refused (403) until a namespace's "default" ServiceAccount exists, which
        # the controller-manager creates a moment after the namespace.
        for ns in (plain_ns, floor_ns, ctl_ns):
            await _wait(
                lambda ns=ns: _exists(client, SERVICE_ACCOUNTS, "default", ns),
                60,
                f"the default ServiceAccount of {ns}",
            )

        # Plain: the same launcher pod body, created by the bench itself.
        template = load(
            VirtualMachineInstance,
            {
                **_vmi("x", plain_ns),
                "metadata": {
                    "name": "x",
                    "namespace": plain_ns,
                    "uid": "00000000-0000-0000-0000-000000000000",
                },
            },
        )
        pod = render_launcher_pod(template, ControllerConfig())
        del pod["metadata"]["ownerReferences"]
        before = _write_counts(kubectl)
        state_dir = ENV["KV_CLUSTER_STATE_DIR"]
        cpu_before = _cpu_seconds(state_dir)
        bound = _Watcher(client, PODS, plain_ns, lambda p: bool(p["spec"].get("nodeName")))
        async with bound:
            t0 = time.monotonic()
            await _bounded(count, lambda i: client.create(PODS, pod))
            await _wait(lambda: bound.reached(count), 600, f"{count} plain pods bound")
            plain = time.monotonic() - t0
        plain_cpu = _cpu_seconds(state_dir) - cpu_before
        plain_writes = _write_counts(kubectl) - before

        # Controller: VMIs in, virt-controller renders and creates the pods.
        log = (Path(ENV["KV_CLUSTER_STATE_DIR"]) / "virt-controller-bench.log").open("wb")
        port = int(ENV["KV_CLUSTER_PORT_BASE"]) + 25
        profiling = ("-m", "cProfile", "-o", str(profile)) if profile is not None else ()
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            *profiling,
            "-m",
            "virt_controller",
            f"--kubeconfig={kubeconfig}",
            "--bind=127.0.0.1",
            f"--port={port}",
            "--leader-elect=false",
            "--use-emulation=false",
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        try:
            # Timed from a ready controller (caches synced), as a running cluster has it.
            await _wait(lambda: _ready(port), 60, "virt-controller /readyz")
            rss_idle = _rss_kib(proc.pid)
            before = _write_counts(kubectl)
            cpu_before = _cpu_seconds(state_dir, proc.pid)
            scheduled = _Watcher(
                client,
                VIRTUAL_MACHINE_INSTANCES,
                ctl_ns,
                lambda v: (v.get("status") or {}).get("phase") == "Scheduled",
            )
            async with scheduled:
                t0 = time.monotonic()
                await _bounded(
                    count,
                    lambda i: client.create(
                        VIRTUAL_MACHINE_INSTANCES, _vmi(f"vmi-{i:04d}", ctl_ns)
                    ),
                )
                created = time.monotonic() - t0
                await _wait(lambda: scheduled.reached(count), 900, f"{count} VMIs Scheduled")
                controlled = time.monotonic() - t0
            ctl_cpu = _cpu_seconds(state_dir, proc.pid) - cpu_before
            rss_full = _rss_kib(proc.pid)
            ctl_writes = _write_counts(kubectl) - before
            pods = await _count(client, PODS, ctl_ns, lambda p: True)
        finally:
            proc.terminate()
            await asyncio.wait_for(proc.wait(), 30)
            log.close()
        try:
            # Floor: each VMI and its pod created by the bench, no controller, no status write.
            # After the controller has stopped (it would take these VMIs over), while the node
            # is kept Ready.
            async def vmi_and_pod(i: int) -> None:
                vmi = await client.create(VIRTUAL_MACHINE_INSTANCES, _vmi(f"vmi-{i:04d}", floor_ns))
                rendered = render_launcher_pod(
                    load(VirtualMachineInstance, vmi), ControllerConfig()
                )
                await client.create(PODS, rendered)

            before = _write_counts(kubectl)
            cpu_before = _cpu_seconds(state_dir)
            bound = _Watcher(client, PODS, floor_ns, lambda p: bool(p["spec"].get("nodeName")))
            async with bound:
                t0 = time.monotonic()
                await _bounded(count, vmi_and_pod)
                await _wait(lambda: bound.reached(count), 600, f"{count} floor pods bound")
                floor = time.monotonic() - t0
            floor_cpu = _cpu_seconds(state_dir) - cpu_before
            floor_writes = _write_counts(kubectl) - before
        finally:
            stop.set()
            await ready

    noise = ("leases", "nodes/status", "events")
    for writes in (plain_writes, floor_writes, ctl_writes):
        for key in noise:
            writes.pop(key, None)
    print(f"count: {count} (pods bound to one fake node; {IN_FLIGHT} requests in flight)")
    print(f"plain client, {count} pods created and bound:       {plain:7.2f} s")
    print(
        f"virt-controller, {count} VMIs created -> Scheduled:  {controlled:7.2f} s "
        f"(VMI creates alone {created:.2f} s)"
    )
    print(
        f"floor, {count} VMIs and their pods created by the bench -> pods bound: {floor:7.2f} s "
        f"({sum(floor_writes.values()) / count:.2f} writes per VMI)"
    )
    print(f"ratio controller / plain: {controlled / plain:.2f}")
    print(
        f"ratio floor / plain: {floor / plain:.2f} (no VMI controller can do better here: "
        "it needs these writes and the status write)"
    )
    print(f"launcher pods in the controller namespace: {pods} (duplicates: {pods - count})")
    print(
        f"virt-controller RSS: {rss_idle / 1024:.1f} MiB ready, {rss_full / 1024:.1f} MiB with "
        f"{count} VMIs and their pods cached: {(rss_full - rss_idle) / count:.1f} KiB per VMI"
    )
    _print_cpu("plain pods", plain_cpu, plain)
    _print_cpu("floor (VMIs and pods by the bench)", floor_cpu, floor)
    _print_cpu("VMIs through virt-controller", ctl_cpu, controlled)
    total = sum(ctl_writes.values())
    print(
        f"API writes per VMI up to Scheduled: {total / count:.2f} "
        f"(plain pods: {sum(plain_writes.values()) / count:.2f} per pod)"
    )
    for resource, n in sorted(ctl_writes.items(), key=lambda kv: -kv[1]):
        print(f"  {resource:45s} {n:6d}  {n / count:5.2f}/VMI")


def _cpu_seconds(state_dir: str, controller: int | None = None) -> Counter[str]:
    """CPU seconds (user + system) used so far by the private cluster's processes (those
    whose command line names its state dir), by program; virt-controller and the bench too."""
    tick = os.sysconf("SC_CLK_TCK")
    used: Counter[str] = Counter()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(entry.name) == controller:
            name = "virt-controller"
        elif int(entry.name) == os.getpid():
            name = "bench (this process)"
        elif state_dir.encode() in b" ".join(argv):
            name = Path(argv[0].decode(errors="replace")).name
        else:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        used[name] += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    return used


def _print_cpu(phase: str, used: Counter[str], wall: float) -> None:
    total = sum(used.values())
    print(f"CPU seconds, {phase} ({wall:.1f} s wall, {total:.1f} s CPU on {os.cpu_count()} cores):")
    for name, seconds in used.most_common():
        if seconds >= 0.05:
            print(f"  {name:28s} {seconds:7.1f} s  {100 * seconds / max(total, 1e-9):5.1f} %")


def _rss_kib(pid: int | None) -> int:
    """Resident memory of a process, from /proc (the profiler's wrapper is the same pid)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


async def _ready(port: int) -> bool:
    def get() -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r:
                return bool(r.status == 200)
        except OSError:
            return False

    return await asyncio.to_thread(get)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=500)
    parser.add_argument("--keep", action="store_true", help="leave the private cluster running")
    parser.add_argument(
        "--profile",
        type=Path,
        metavar="FILE",
        help="run virt-controller under cProfile and write its stats to FILE",
    )
    args = parser.parse_args(argv)
    if args.count < 1:
        parser.error("--count: must be at least 1")
    cluster = Cluster.from_env({**os.environ, **ENV}, progress=sys.stderr)
    try:
        # The bench runs virt-controller itself: the cluster runs none of KubeVirt.
        cluster.up(kubevirt=False)
        kubectl = Kubectl(cluster.kubeconfig)
        asyncio.run(run(args.count, cluster.kubeconfig, kubectl, args.profile))
    finally:
        if not args.keep:
            cluster.down()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
