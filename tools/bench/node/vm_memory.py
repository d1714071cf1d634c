"""Memory per running VM on the local cluster's node: each launcher pod's processes and
virt-handler's growth (printed, never judged).

Run: ``uv run python tools/bench/node/vm_memory.py [--vms N] [--imports]`` against a
cluster brought up by ``uv run kv-cluster up``.

- Before: virt-handler's RSS on the node (its pod's `python3 -m virt_handler`).
- N kernel-boot VMIs (default 3, the one bench_start starts) on that node, each waited for
  until its guest's marker is in its serial log; then a settle of a few seconds (the guest
  agent's first polls, the handler's first resyncs).
- Each launcher pod's processes, found by the pod's cgroup: virt-launcher (our Python
  process), libvirtd, virtlogd, and QEMU (the guest itself: its RAM, counted apart).
  RSS, PSS (shared pages split between the processes that map them: libvirtd and the
  launcher load the same libvirt libraries) and anonymous memory, from
  /proc/PID/smaps_rollup.
- virt-handler's RSS after, and its growth per VM.
- Baselines in the same run: a bare ``python3`` in the same launcher container (the
  interpreter's floor), and upstream KubeVirt's per-VM overhead budget for the same
  processes (its hypervisor overheads: virt-launcher-monitor 25 MiB, virt-launcher
  100 MiB, virtqemud 35 MiB, virtlogd 20 MiB; kubevirt-py has no separate monitor
  process and runs libvirtd in virtqemud's place).
- ``--imports``: RSS after each group of the launcher's imports, in its container.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kv_cluster import Cluster
from kv_cluster.kubectl import Kubectl
from kv_cluster.nodes import node_specs
from kv_images.guest import GUEST_MARKER

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "start"))
from bench_start import kernel_boot_vmi

__all__ = ["main"]

#: Upstream's per-VM overhead budget for the launcher pod's own processes (MiB).
UPSTREAM_BUDGET_MIB = {
    "virt-launcher-monitor": 25,
    "virt-launcher": 100,
    "virtqemud": 35,
    "virtlogd": 20,
}
ROLES = ("virt-launcher", "libvirtd", "virtlogd", "qemu (guest)")
SETTLE_SECONDS = 5.0
_IMPORT_GROUPS = (
    "asyncio",
    "libvirt",
    "structlog",
    "marshmallow",
    "kubevirt_api.models.generated",
    "betterproto2",
    "grpclib.server grpclib.client",
    "virt_rpc",
    "virt_domain",
    "service_kit",
    "virt_launcher.main",
    # Imported by the first ISO a launcher builds (cloud-init, config volumes).
    "pycdlib",
)
# Run in the launcher's container: the RSS after each import group (one JSON line each).
_IMPORT_PROBE = """
import importlib, json, sys
def rss():
    for line in open('/proc/self/status'):
        if line.startswith('VmRSS:'):
            return int(line.split()[1])
print(json.dumps(['(interpreter)', rss()]))
for group in sys.argv[1:]:
    for name in group.split():
        importlib.import_module(name)
    print(json.dumps([group, rss()]))
"""
_FLOOR_PROBE = "print(open('/proc/self/smaps_rollup').read())"


@dataclass(frozen=True)
class Memory:
    """One process's memory, in KiB."""

    rss: int
    pss: int
    anonymous: int

    @classmethod
    def parse(cls, rollup: str) -> Memory:
        fields = {}
        for line in rollup.splitlines():
            key, _, value = line.partition(":")
            if value.strip().endswith("kB"):
                fields[key] = int(value.split()[0])
        return cls(fields.get("Rss", 0), fields.get("Pss", 0), fields.get("Anonymous", 0))

    @classmethod
    def of(cls, pid: int) -> Memory | None:
        try:
            return cls.parse(Path(f"/proc/{pid}/smaps_rollup").read_text())
        except OSError:
            return None


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _pids() -> Iterable[int]:
    return (int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit())


def _role(cmdline: str) -> str | None:
    if cmdline.startswith("python3 -m virt_launcher "):
        return "virt-launcher"
    program = Path(cmdline.split(" ", 1)[0]).name
    if program == "libvirtd":
        return "libvirtd"
    if program == "virtlogd":
        return "virtlogd"
    if program.startswith("qemu-system"):
        return "qemu (guest)"
    return None


def pod_processes(pod_uid: str) -> dict[str, Memory]:
    """The launcher pod's processes by role, found by the pod's cgroup."""
    marker = pod_uid.replace("-", "_")
    found: dict[str, Memory] = {}
    for pid in _pids():
        try:
            cgroup = Path(f"/proc/{pid}/cgroup").read_text()
        except OSError:
            continue
        if marker not in cgroup and pod_uid not in cgroup:
            continue
        role = _role(_cmdline(pid))
        memory = Memory.of(pid)
        if role is not None and memory is not None and role not in found:
            found[role] = memory
    return found


def handler_memory(node: str) -> Memory | None:
    """virt-handler's memory on `node` (its Python process, not the shell around it)."""
    for pid in _pids():
        line = _cmdline(pid)
        if line.startswith("python3 -m virt_handler ") and f"--node-name={node} " in f"{line} ":
            return Memory.of(pid)
    return None


class Run:
    """The VMIs of one run, in their own namespace."""

    def __init__(self, kubectl: Kubectl, pods_dir: Path, node: str) -> None:
        self.kubectl = kubectl
        self.pods_dir = pods_dir
        self.node = node
        self.namespace = f"kv-bench-memory-{uuid.uuid4().hex[:4]}"

    def _json(self, *args: str) -> dict[str, Any]:
        found: dict[str, Any] = json.loads(
            self.kubectl.run(*args, "-n", self.namespace, "-o", "json").stdout
        )
        return found

    def start(self, count: int) -> dict[str, str]:
        """Create `count` VMIs; return {VMI name: launcher pod uid} once each guest's marker
        is in its serial log."""
        self.kubectl.run("create", "namespace", self.namespace)
        names = [f"mem-{i}" for i in range(count)]
        for name in names:
            body = json.dumps(kernel_boot_vmi(name, self.namespace, self.node))
            self.kubectl.run("create", "-f", "-", stdin=body)
        booted: dict[str, str] = {}
        deadline = time.monotonic() + 300 * count
        while len(booted) < count:
            if time.monotonic() > deadline:
                raise SystemExit(f"timed out: booted {sorted(booted)} of {names}")
            vmis = {v["metadata"]["name"]: v for v in self._json("get", "vmi")["items"]}
            pods = self._json("get", "pods", "-l", "kubevirt.io=virt-launcher")["items"]
            for pod in pods:
                name = pod["metadata"].get("labels", {}).get("vm.kubevirt.io/name", "")
                vmi = vmis.get(name)
                if vmi is None or name in booted:
                    continue
                log = (
                    self.pods_dir
                    / pod["metadata"]["uid"]
                    / "volumes/kubernetes.io~empty-dir/private"
                    / vmi["metadata"]["uid"]
                    / "virt-serial0-log"
                )
                try:
                    if GUEST_MARKER.encode() in log.read_bytes():
                        booted[name] = pod["metadata"]["uid"]
                except OSError:
                    pass
            time.sleep(0.5)
        return booted

    def launcher_pod(self, name: str) -> str:
        pods = self._json("get", "pods", "-l", f"vm.kubevirt.io/name={name}")["items"]
        return str(pods[0]["metadata"]["name"])

    def in_launcher(self, pod: str, *argv: str) -> str:
        return self.kubectl.run(
            "exec", "-n", self.namespace, pod, "-c", "compute", "--", *argv
        ).stdout

    def delete(self) -> None:
        self.kubectl.run("delete", "namespace", self.namespace, "--wait=false", check=False)


def _mib(kib: float) -> str:
    return f"{kib / 1024:7.1f}"


def main(argv: list[str] | None = None) -> int:
    """Start the VMs, read the memory, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--vms", type=int, default=3)
    parser.add_argument("--imports", action="store_true")
    args = parser.parse_args(argv)
    cluster = Cluster.from_env(progress=sys.stderr)
    ctx = cluster._context()
    node = node_specs(ctx.config, ctx.layout, 1)[0]
    before = handler_memory(node.name)
    if before is None:
        raise SystemExit(f"no virt-handler process for node {node.name}: is the cluster up?")
    run = Run(Kubectl(cluster.kubeconfig), node.kubelet_root / "pods", node.name)
    try:
        booted = run.start(args.vms)
        time.sleep(SETTLE_SECONDS)  # a benchmark's settle, not a test's wait
        measured = {name: pod_processes(uid) for name, uid in sorted(booted.items())}
        after = handler_memory(node.name)
        pod = run.launcher_pod(next(iter(measured)))
        floor = Memory.parse(run.in_launcher(pod, "python3", "-c", _FLOOR_PROBE))
        imports = (
            [
                json.loads(line)
                for line in run.in_launcher(
                    pod, "python3", "-c", _IMPORT_PROBE, *_IMPORT_GROUPS
                ).splitlines()
            ]
            if args.imports
            else []
        )
    finally:
        run.delete()

    print(f"{args.vms} kernel-boot VMs on {node.name}, MiB per process (RSS / PSS / anonymous)")
    print(f"{'VM':<8} " + " ".join(f"{role:>24}" for role in ROLES))
    for name, found in measured.items():
        cells = []
        for role in ROLES:
            m = found.get(role)
            cells.append(
                f"{'-':>24}" if m is None else f"{_mib(m.rss)}/{_mib(m.pss)}/{_mib(m.anonymous)}"
            )
        print(f"{name:<8} " + " ".join(cells))
    print()
    own = [r for r in ROLES if r != "qemu (guest)"]
    for kind in ("rss", "pss"):
        per_role = {
            r: statistics.median(getattr(f[r], kind) for f in measured.values() if r in f)
            for r in own
            if any(r in f for f in measured.values())
        }
        total = sum(per_role.values())
        print(
            f"p50 {kind.upper()}: "
            + ", ".join(f"{r} {v / 1024:.1f}" for r, v in per_role.items())
            + f"; the pod's own processes {total / 1024:.1f} MiB"
        )
    launcher_rss = statistics.median(
        f["virt-launcher"].rss for f in measured.values() if "virt-launcher" in f
    )
    budget = sum(UPSTREAM_BUDGET_MIB.values())
    print(
        f"\nbare python3 in the launcher container: RSS {floor.rss / 1024:.1f} MiB, anonymous"
        f" {floor.anonymous / 1024:.1f}; virt-launcher ÷ bare python3 = "
        f"{launcher_rss / floor.rss:.1f}x"
    )
    print(
        f"upstream's budget for the same processes: {budget} MiB "
        + "("
        + ", ".join(f"{k} {v}" for k, v in UPSTREAM_BUDGET_MIB.items())
        + ")"
    )
    if after is not None:
        growth = (after.rss - before.rss) / max(len(measured), 1)
        print(
            f"virt-handler RSS {before.rss / 1024:.1f} -> {after.rss / 1024:.1f} MiB with"
            f" {len(measured)} VMs: {growth / 1024:+.2f} MiB per VM"
        )
    if imports:
        print("\nthe launcher's imports in its container (RSS after each, MiB):")
        previous = None
        for group, rss in imports:
            step = "" if previous is None else f" (+{(rss - previous) / 1024:.1f})"
            print(f"  {group:<32} {rss / 1024:6.1f}{step}")
            previous = rss
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
