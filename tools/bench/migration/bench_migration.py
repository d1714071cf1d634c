"""Live migration through kubevirt-py versus a bare libvirt migration (printed, never judged).

Run, as root: ``uv run python tools/bench/migration/bench_migration.py [--rounds N]`` against
a cluster with two nodes brought up by ``uv run kv-cluster up --nodes 2``; it builds the
images it needs with kv-images (virt-launcher, guest-kernel-boot; cached by content) and
pushes them to the cluster's registry, makes its own namespace and deletes it at the end.
Without such a cluster it stops at once and says so. ``--bare-only`` runs the bare part
alone (no cluster needed).

The guest is the tiny kernel-boot guest (kv_images) with 128 MiB, one vCPU, TCG, a
16 MiB disk that must be copied along (an emptyDisk: block migration) and the kernel
argument ``kubevirt_py.tick``, with which it prints a numbered tick on its serial console
every 10 ms.

- kubevirt-py: a VM (masquerade on the pod network) is started, then moved between the
  two nodes once per round by a VirtualMachineInstanceMigration. Measured: the VMIM's
  creation → phase Succeeded (polled every 50 ms), with the time each phase was first
  seen, and `status.migrationState` startTimestamp → endTimestamp (what the launchers
  recorded; seconds, so ±1 s).
- bare: two libvirtds of the launcher's kind on this host, the same guest, what
  ``virsh migrate --live --p2p --copy-storage-all`` does (bare.py), timed around the call.
- downtime, both: the silence on the guest's console across the switch-over, the
  source's last tick to the target's first, by this host's clock (ticks.py: the guest's
  own clock stands still while it is paused, so it cannot tell). For the cluster the
  consoles are the serial logs in the two launcher pods' private dirs, tailed every 2 ms;
  for bare, the two QEMUs' serial sockets. libvirt's own downtime figure of the bare job
  is printed beside it.

Ratio = p50(kubevirt-py VMIM created → Succeeded) ÷ p50(bare migration call).
Differences that remain: kubevirt-py relays the streams through both virt-handlers over
mutual TLS and uses multifd (8 channels, upstream's default); the bare migration goes
straight over unix sockets on one channel; the cluster guest has a NIC.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "launcher"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "start"))
from bare import BareResult, bare_round
from bench_start import kernel_boot_vmi as start_bench_vmi
from kv_cluster import Cluster
from kv_cluster.kubectl import Kubectl
from kv_cluster.nodes import node_specs, read_node_count
from kv_images import Layout, Progress, ensure_guest, find_guest_kernel
from kv_images.guest import GUEST_MARKER, GUEST_TICK_ARG
from start import _user as launcher_user
from ticks import Switchover, TickLog, follow_file, switchover

__all__ = ["main"]

REPO_ROOT = Path(__file__).resolve().parents[3]
NODES = 2
IMAGES = ("virt-launcher", "guest-kernel-boot")
PHASES = ("Pending", "Scheduling", "Scheduled", "PreparingTarget", "TargetReady", "Running")
VM = "mover"


class NoCluster(SystemExit):
    """No two-node cluster to measure on: the message says how to get one."""

    def __init__(self, why: str) -> None:
        super().__init__(
            f"bench_migration: {why}.\n"
            f"  The kubevirt-py part needs {NODES} schedulable nodes: "
            "`uv run kv-cluster up --nodes 2` (or run with --bare-only)."
        )


def _vm(name: str) -> dict[str, Any]:
    """bench_start's kernel-boot VMI as a VM's template, with the tick, a disk that must be
    copied along and masquerade on the pod network."""
    spec = start_bench_vmi(name, "")["spec"]
    kernel_boot = spec["domain"]["firmware"]["kernelBoot"]
    kernel_boot["container"]["imagePullPolicy"] = "Always"  # devel moves with every push
    kernel_boot["kernelArgs"] += f" {GUEST_TICK_ARG}"
    spec["domain"]["devices"] = {
        "disks": [{"name": "scratch", "disk": {"bus": "virtio"}}],
        "interfaces": [{"name": "default", "masquerade": {}}],
    }
    spec["networks"] = [{"name": "default", "pod": {}}]
    spec["volumes"] = [{"name": "scratch", "emptyDisk": {"capacity": "16Mi"}}]
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": name},
        "spec": {
            "runStrategy": "Always",
            "template": {"metadata": {"labels": {"kubevirt.io/vm": name}}, "spec": spec},
        },
    }


def _time(stamp: str | None) -> dt.datetime | None:
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")) if stamp else None


@dataclass
class ClusterRound:
    """One VMIM, observed."""

    phases: dict[str, float] = field(default_factory=dict)
    #: migrationState endTimestamp - startTimestamp
    recorded: float | None = None
    switch: Switchover | None = None
    source: str = ""
    target: str = ""


class ClusterBench:
    """The VM on the two-node cluster, migrated back and forth."""

    def __init__(self, rounds: int) -> None:

        cluster = Cluster.from_env(progress=sys.stderr)
        if not cluster.exists:
            raise NoCluster(f"no cluster at {cluster.layout.root}")
        ctx = cluster._context()
        count = read_node_count(ctx.layout)
        if count < NODES:
            raise NoCluster(f"the cluster at {cluster.layout.root} has {count} node(s)")
        self.kubeconfig = cluster.kubeconfig
        self.kubectl = Kubectl(cluster.kubeconfig)
        self.kubelet_roots = {
            n.name: n.kubelet_root for n in node_specs(ctx.config, ctx.layout, count)
        }
        ready = self._schedulable_nodes()
        if len(ready) < NODES:
            raise NoCluster(
                f"schedulable nodes with kubevirt.io/schedulable=true: {ready or 'none'}"
            )
        self.rounds = rounds
        self.namespace = f"kv-bench-migration-{uuid.uuid4().hex[:4]}"

    def _schedulable_nodes(self) -> list[str]:
        found = self.kubectl.run("get", "nodes", "-o", "json", check=False)
        if found.returncode != 0:
            raise NoCluster(f"the API server does not answer: {found.stderr.strip()}")
        names = []
        for node in json.loads(found.stdout)["items"]:
            ready = any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in node.get("status", {}).get("conditions", [])
            )
            labels = node["metadata"].get("labels", {})
            if (
                ready
                and labels.get("kubevirt.io/schedulable") == "true"
                and not node["spec"].get("unschedulable")
            ):
                names.append(node["metadata"]["name"])
        return names

    def _get(self, *args: str) -> dict[str, Any] | None:
        found = self.kubectl.run(*args, "-n", self.namespace, "-o", "json", check=False)
        return json.loads(found.stdout) if found.returncode == 0 else None

    def _serial_log(self, pod: dict[str, Any], vmi_uid: str) -> Path:
        root = self.kubelet_roots[pod["spec"]["nodeName"]]
        volumes = root / "pods" / pod["metadata"]["uid"] / "volumes" / "kubernetes.io~empty-dir"
        return volumes / "private" / vmi_uid / "virt-serial0-log"

    def _launcher_pod(self, node: str) -> dict[str, Any] | None:
        pods = self._get("get", "pods", "-l", "kubevirt.io=virt-launcher") or {}
        for pod in pods.get("items", []):
            labels = pod["metadata"].get("labels", {})
            if (
                labels.get("vm.kubevirt.io/name") == VM
                and pod["spec"].get("nodeName") == node
                and pod["status"].get("phase") in ("Pending", "Running")
            ):
                return pod
        return None

    def _wait(self, what: str, check: Any, within: float, interval: float = 0.05) -> Any:
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            found = check()
            if found:
                return found
            time.sleep(interval)
        raise RuntimeError(f"timed out after {within:g}s waiting for {what}")

    def _boot(self) -> dict[str, Any]:
        self.kubectl.run("apply", "-n", self.namespace, "-f", "-", stdin=json.dumps(_vm(VM)))

        def running() -> dict[str, Any] | None:
            vmi = self._get("get", "vmi", VM)
            return vmi if vmi and vmi.get("status", {}).get("phase") == "Running" else None

        vmi: dict[str, Any] = self._wait("the VMI Running", running, 300, 0.5)
        pod = self._wait(
            "its launcher pod", lambda: self._launcher_pod(vmi["status"]["nodeName"]), 60
        )
        log = self._serial_log(pod, vmi["metadata"]["uid"])

        def ticking() -> bool:
            try:
                text = log.read_bytes()
            except OSError:
                return False
            return GUEST_MARKER.encode() in text and text.count(b"GUEST-TICK") > 100

        self._wait("the guest's marker and ticks on its console", ticking, 240, 0.5)
        return vmi

    def _migrate(self, index: int, vmi: dict[str, Any]) -> ClusterRound:
        seen = ClusterRound(source=vmi["status"]["nodeName"])
        target_node = next(n for n in self.kubelet_roots if n != seen.source)
        vmi_uid = vmi["metadata"]["uid"]
        source_pod = self._launcher_pod(seen.source)
        assert source_pod is not None, f"no launcher pod on {seen.source}"
        source_log, target_log = TickLog(), TickLog()
        target_path: list[Path] = []
        stop = threading.Event()
        watchers = [
            threading.Thread(
                target=follow_file,
                args=(lambda: self._serial_log(source_pod, vmi_uid), source_log, stop),
            ),
            threading.Thread(
                target=follow_file,
                args=(lambda: target_path[0] if target_path else None, target_log, stop),
            ),
        ]
        for watcher in watchers:
            watcher.start()
        name = f"move-{index}"
        body = {
            "apiVersion": "kubevirt.io/v1",
            "kind": "VirtualMachineInstanceMigration",
            "metadata": {"name": name},
            "spec": {"vmiName": VM},
        }
        try:
            t0 = time.monotonic()
            self.kubectl.run("create", "-n", self.namespace, "-f", "-", stdin=json.dumps(body))
            deadline = t0 + 300
            while "Succeeded" not in seen.phases:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"migration {name} not Succeeded after 300 s: {seen.phases}")
                vmim = self._get("get", "vmim", name) or {}
                now = time.monotonic() - t0
                phase = vmim.get("status", {}).get("phase")
                if phase == "Failed":
                    raise RuntimeError(f"migration {name} failed: {json.dumps(vmim.get('status'))}")
                if phase:
                    seen.phases.setdefault(phase, now)
                if not target_path:
                    pod = self._launcher_pod(target_node)
                    if pod is not None:
                        target_path.append(self._serial_log(pod, vmi_uid))
                time.sleep(0.05)
            # The target's first ticks are there once it resumed; wait for a few.
            self._wait("the guest ticking on the target", lambda: len(target_log.ticks) > 20, 30)
        finally:
            stop.set()
            for watcher in watchers:
                watcher.join()
        moved = self._get("get", "vmi", VM) or {}
        state = moved.get("status", {}).get("migrationState", {})
        start, end = _time(state.get("startTimestamp")), _time(state.get("endTimestamp"))
        if start and end:
            seen.recorded = (end - start).total_seconds()
        seen.target = moved.get("status", {}).get("nodeName", "")
        seen.switch = switchover(source_log, target_log, t0)
        return seen

    def run(self) -> list[ClusterRound]:
        self.kubectl.run("create", "namespace", self.namespace)
        rounds = []
        try:
            vmi = self._boot()
            for index in range(self.rounds):
                seen = self._migrate(index, vmi)
                rounds.append(seen)
                _print_cluster_round(index, seen)
                vmi = self._wait(
                    "the source launcher pod to finish",
                    lambda seen=seen: (
                        self._get("get", "vmi", VM)
                        if self._launcher_pod(seen.source) is None
                        else None
                    ),
                    120,
                    0.5,
                )
        finally:
            self.kubectl.run("delete", "namespace", self.namespace, "--wait=false", check=False)
        return rounds


def _print_cluster_round(index: int, seen: ClusterRound) -> None:
    phases = ", ".join(f"{p} {t:.2f}s" for p, t in seen.phases.items())
    switch = seen.switch
    down = f"{switch.downtime * 1000:.0f} ms" if switch else "n/a"
    print(
        f"kubevirt-py round {index + 1} ({seen.source} -> {seen.target}): {phases}; "
        f"migrationState {seen.recorded}s; downtime {down}",
        flush=True,
    )


def _print_bare_round(index: int, result: BareResult) -> None:
    switch = result.switch
    down = f"{switch.downtime * 1000:.0f} ms" if switch else "n/a"
    extra = ""
    if switch:
        extra = (
            f" (ticks {switch.last_source_tick} -> {switch.first_target_tick}, longest "
            f"gap before it {switch.longest_source_gap * 1000:.0f} ms)"
        )
    stats = result.stats
    print(
        f"bare round {index + 1}: migration {result.seconds:.2f}s; downtime {down}{extra}; "
        f"libvirt: downtime {stats.get('downtime', '?')} ms, memory "
        f"{stats.get('memory_processed', 0) / 2**20:.1f} MiB, disk "
        f"{stats.get('disk_processed', 0) / 2**20:.1f} MiB",
        flush=True,
    )


def _p50(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _build_images() -> None:
    build = subprocess.run(
        [sys.executable, "-m", "kv_images.cli", "build", *IMAGES],
        cwd=REPO_ROOT,
        check=False,
    )
    if build.returncode != 0:
        raise SystemExit(f"bench_migration: kv-images build {' '.join(IMAGES)} failed")


def main(argv: list[str] | None = None) -> int:
    """Run the rounds and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--bare-only", action="store_true", help="skip the kubevirt-py part")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        raise SystemExit("bench_migration: run as root (libvirtd and QEMU run as uid 107)")
    cluster = None if args.bare_only else ClusterBench(args.rounds)  # fails early without one
    cluster_rounds: list[ClusterRound] = []
    if cluster is not None:
        _build_images()
        cluster_rounds = cluster.run()
    guest = ensure_guest(find_guest_kernel(), Layout.default(), Progress())
    bare: list[BareResult] = []
    command = ""
    for index in range(args.rounds):
        result, command = asyncio.run(bare_round(guest, launcher_user()))
        bare.append(result)
        _print_bare_round(index, result)
    print(f"\nbare migration = {command}")
    bare_p50 = _p50([r.seconds for r in bare])
    bare_down = _p50([r.switch.downtime for r in bare if r.switch])
    libvirt_down = _p50([float(r.stats["downtime"]) for r in bare if "downtime" in r.stats])
    print(f"bare libvirt migration (call)          p50 {bare_p50:.2f}s over {len(bare)} rounds")
    print(f"bare downtime (guest's console)        p50 {bare_down * 1000:.0f} ms")
    print(f"bare downtime (libvirt's job stats)    p50 {libvirt_down:.0f} ms")
    if cluster_rounds:
        print()
        print(f"{'VMIM phase':<16} {'p50 since create (s)':>21}")
        for phase in (*PHASES, "Succeeded"):
            values = [r.phases[phase] for r in cluster_rounds if phase in r.phases]
            if values:
                print(f"{phase:<16} {_p50(values):>21.2f}")
        total = _p50([r.phases["Succeeded"] for r in cluster_rounds])
        recorded = _p50([r.recorded for r in cluster_rounds if r.recorded is not None])
        down = _p50([r.switch.downtime for r in cluster_rounds if r.switch])
        print(
            f"kubevirt-py VMIM created -> Succeeded  p50 {total:.2f}s over {len(cluster_rounds)} rounds"
        )
        print(f"kubevirt-py migrationState start->end  p50 {recorded:.0f}s (whole seconds)")
        print(f"kubevirt-py downtime (guest's console) p50 {down * 1000:.0f} ms")
        print(f"ratio kubevirt-py (create -> Succeeded) / bare  {total / bare_p50:.1f}x")
        print(f"ratio kubevirt-py (start -> end) / bare         {recorded / bare_p50:.1f}x")
        print(f"ratio downtime kubevirt-py / bare               {down / bare_down:.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
