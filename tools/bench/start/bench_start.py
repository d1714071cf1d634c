"""VMI start on the local cluster versus bare QEMU: time to the guest's marker (printed, never judged).

Run: ``uv run python tools/bench/start/bench_start.py [--rounds N]`` against a cluster
brought up by ``uv run kv-cluster up`` (node, virt-api, virt-controller, virt-handler)
with the images built (``uv run kv-images build virt-launcher guest-kernel-boot``).

- cluster: ``kubectl create`` of a kernel-boot VMI → the marker on the console. Stages,
  each the first time it is observed (polled every 20 ms):
  admission (the create call returns) → pod created → pod scheduled (spec.nodeName) →
  launcher ready (`launcher-sock` in the pod's sockets dir) → domain started (VMI
  Running) → marker (first seen in the serial console's log, which `virtctl console`
  replays); "console" is when `virtctl console --until MARKER` returned.
- bare: ``qemu-system-x86_64 -accel tcg -kernel … -initrd …`` spawned → marker on its
  serial stdout, same kernel and initramfs.
- API writes per VMI start, from the apiserver's audit log (`kv_cluster.audit`): every
  write to the round's VMI and its pod, by client, resource, verb and response code,
  split at the write that made the VMI Running, then up to the round's delete; the
  deletion's writes are left out (the round waits for the VMI and pod to be gone before
  the next one starts, so rounds do not mix). kubevirt-py's own writes are those of the
  `kubevirt` namespace's service accounts; a refused write (code ≥ 400) and one that
  changed nothing (a guarded patch answered with the version it was guarded by) are
  counted apart. Cluster-wide, the growth of `apiserver_request_total` writes by resource,
  subresource and verb is printed too (every client, every object, deletions included).

Ratio = p50(cluster to marker) ÷ p50(bare to marker). A bare round follows each cluster
round (once its VMI and pod are gone), so a machine whose speed drifts during the run
(TCG on a shared host does) slows both sides alike.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kube_runtime import PODS, VIRTUAL_MACHINE_INSTANCES, connect, get_or_none
from kv_cluster import Cluster
from kv_cluster.audit import AuditedWrite, read_audited_writes
from kv_cluster.kubectl import Kubectl
from kv_cluster.nodes import node_specs
from kv_images.guest import GUEST_MARKER

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "launcher"))
from start import bare_qemu, tiny_guest

__all__ = ["kernel_boot_vmi", "main"]

STAGES = ("admission", "pod created", "pod scheduled", "launcher ready", "domain started", "marker")
_APISERVER = re.compile(r"^apiserver_request_total\{([^}]*)\} ([0-9.e+]+)$", re.MULTILINE)
_LABEL = re.compile(r'(\w+)="([^"]*)"')
_READS = ("GET", "WATCH", "LIST")
Tally = dict[tuple[str, ...], float]


def _apiserver_writes(kubectl: Kubectl) -> Tally:
    """Every client's writes the apiserver served, by (resource, subresource, verb, code)."""
    text = kubectl.run("get", "--raw", "/metrics", check=False).stdout
    tally: Tally = {}
    for labels, value in _APISERVER.findall(text):
        found = dict(_LABEL.findall(labels))
        if found.get("verb", "GET") in (*_READS, "WATCHLIST", "CONNECT"):
            continue
        at = (
            found.get("resource", "?"),
            found.get("subresource", ""),
            found.get("verb", "?"),
            found.get("code", "?"),
        )
        tally[at] = tally.get(at, 0.0) + float(value)
    return tally


def _growth(before: Tally, after: Tally) -> Tally:
    return {k: v - before.get(k, 0.0) for k, v in after.items() if v - before.get(k, 0.0) > 0}


#: Who kubevirt-py is in the audit log: its components' service accounts.
OURS = "system:serviceaccount:kubevirt:"


@dataclass
class RoundWrites:
    """The audited writes to one round's VMI and pod, before its delete."""

    to_running: list[AuditedWrite] = field(default_factory=list)
    after_running: list[AuditedWrite] = field(default_factory=list)

    @classmethod
    def split(cls, writes: list[AuditedWrite], before: float) -> RoundWrites:
        running = min(
            (
                w.epoch
                for w in writes
                if w.resource == "virtualmachineinstances" and w.phase == "Running"
            ),
            default=before,
        )
        found = cls()
        for w in writes:
            if w.epoch <= running:
                found.to_running.append(w)
            elif w.epoch < before:
                found.after_running.append(w)
        return found


def _ours(writes: list[AuditedWrite]) -> list[AuditedWrite]:
    return [w for w in writes if w.user.startswith(OURS)]


def _who(user: str) -> str:
    return user.removeprefix(OURS).removeprefix("system:serviceaccount:")


def kernel_boot_vmi(name: str, namespace: str, node: str | None = None) -> dict[str, Any]:
    """The kernel-boot VMI, on `node` when given (the one whose pod directories a round
    watches); other benchmarks start from it too."""
    vmi: dict[str, Any] = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstance",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "domain": {
                "firmware": {
                    "kernelBoot": {
                        "container": {
                            "image": "kubevirt-py/guest-kernel-boot:devel",
                            "imagePullPolicy": "IfNotPresent",
                            "kernelPath": "/boot/vmlinuz",
                            "initrdPath": "/boot/initrd.img",
                        },
                        "kernelArgs": "console=ttyS0",
                    }
                },
                "devices": {},
                "memory": {"guest": "128Mi"},
            },
        },
    }
    if node is not None:
        vmi["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
    return vmi


class ClusterRound:
    """One VMI start, observed stage by stage."""

    def __init__(self, kubectl: Kubectl, pods_dir: Path, namespace: str, node: str) -> None:
        self.kubectl = kubectl
        self.pods_dir = pods_dir
        self.namespace = namespace
        self.node = node

    async def _observe(self, kubeconfig: Path, name: str, t0: float) -> dict[str, float]:
        """Each stage's first sighting, polled over one kept-alive API connection: a kubectl
        process per poll would take CPU from the start it measures on a 2-core machine."""
        seen: dict[str, float] = {"admission": time.monotonic() - t0}
        pod_uid = vmi_uid = ""
        self.pod_name = ""
        deadline = t0 + 300
        client = await connect(kubeconfig)
        async with client:
            while "marker" not in seen and time.monotonic() < deadline:
                now = time.monotonic() - t0
                if "pod scheduled" not in seen:
                    pods = await client.list(
                        PODS,
                        self.namespace,
                        label_selector=f"kubevirt.io=virt-launcher,vm.kubevirt.io/name={name}",
                    )
                    for pod in pods.get("items", []):
                        seen.setdefault("pod created", now)
                        pod_uid = pod["metadata"]["uid"]
                        self.pod_name = pod["metadata"]["name"]
                        if pod["spec"].get("nodeName"):
                            seen["pod scheduled"] = now
                volumes = self.pods_dir / pod_uid / "volumes" / "kubernetes.io~empty-dir"
                socket = volumes / "sockets" / "launcher-sock"
                if pod_uid and "launcher ready" not in seen and socket.is_socket():
                    seen["launcher ready"] = now
                if "launcher ready" in seen and "domain started" not in seen:
                    vmi = await get_or_none(client, VIRTUAL_MACHINE_INSTANCES, name, self.namespace)
                    if vmi and vmi.get("status", {}).get("phase") == "Running":
                        seen["domain started"] = now
                        vmi_uid = vmi["metadata"]["uid"]
                if vmi_uid:
                    log = volumes / "private" / vmi_uid / "virt-serial0-log"
                    try:
                        if GUEST_MARKER.encode() in log.read_bytes():
                            seen["marker"] = now
                    except OSError:
                        pass
                await asyncio.sleep(0.02)
        return seen

    def run(self, kubeconfig: Path) -> dict[str, float]:
        name = f"bench-{uuid.uuid4().hex[:6]}"
        body = json.dumps(kernel_boot_vmi(name, self.namespace, self.node))
        t0 = time.monotonic()
        self.kubectl.run("create", "-f", "-", stdin=body)
        seen = asyncio.run(self._observe(kubeconfig, name, t0))
        console = subprocess.run(
            [
                sys.executable,
                "-m",
                "virtctl",
                "console",
                name,
                "-n",
                self.namespace,
                f"--until={GUEST_MARKER}",
                "--timeout-seconds=60",
                f"--kubeconfig={kubeconfig}",
            ],
            capture_output=True,
            text=True,
            check=False,
            stdin=subprocess.DEVNULL,
        )
        if console.returncode == 0:
            seen["console"] = time.monotonic() - t0
        self.name, self.deleted_at = name, time.time()
        self.kubectl.run("delete", "vmi", name, "-n", self.namespace, "--wait=false", check=False)
        # Gone before the next round starts: its writes are not this round's.
        for kind, what in (("vmi", name), ("pod", self.pod_name)):
            if what:
                self.kubectl.run(
                    "wait",
                    "--for=delete",
                    f"{kind}/{what}",
                    "-n",
                    self.namespace,
                    "--timeout=120s",
                    check=False,
                )
        return seen

    def writes(self, audited: list[AuditedWrite]) -> RoundWrites:
        """This round's writes among `audited`: to its VMI and to its pod."""
        mine = [
            w
            for w in audited
            if w.namespace == self.namespace
            and (
                (w.resource.startswith("virtualmachineinstances") and w.name == self.name)
                or (w.resource.startswith("pods") and w.name == self.pod_name)
            )
        ]
        return RoundWrites.split(mine, self.deleted_at)


def _p50(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def main(argv: list[str] | None = None) -> int:
    """Run the rounds and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    cluster = Cluster.from_env(progress=sys.stderr)
    ctx = cluster._context()
    node = node_specs(ctx.config, ctx.layout, 1)[0]
    kubectl = Kubectl(cluster.kubeconfig)
    namespace = f"kv-bench-start-{uuid.uuid4().hex[:4]}"
    kubectl.run("create", "namespace", namespace)
    audit_log = ctx.layout.log("kube-apiserver-audit")
    rounds: list[dict[str, float]] = []
    counted: list[RoundWrites] = []
    cluster_wide: Tally = {}
    vmlinuz, initrd = tiny_guest()
    bare: list[float] = []
    try:
        for index in range(args.rounds):
            offset = audit_log.stat().st_size if audit_log.exists() else 0
            served = _apiserver_writes(kubectl)
            start = ClusterRound(kubectl, node.kubelet_root / "pods", namespace, node.name)
            seen = start.run(cluster.kubeconfig)
            for at, value in _growth(served, _apiserver_writes(kubectl)).items():
                cluster_wide[at] = cluster_wide.get(at, 0.0) + value
            written = start.writes(read_audited_writes(audit_log, offset)[0])
            counted.append(written)
            rounds.append(seen)
            ours = _ours(written.to_running)
            bare.append(asyncio.run(bare_qemu(vmlinuz, initrd)))
            print(
                f"round {index + 1}: "
                + ", ".join(f"{k} {v:.2f}s" for k, v in seen.items())
                + f"; bare {bare[-1]:.2f}s; kubevirt-py writes to Running {len(ours)},"
                f" after {len(_ours(written.after_running))}",
                flush=True,
            )
    finally:
        kubectl.run("delete", "namespace", namespace, "--wait=false", check=False)
    print()
    print(f"{'stage':<16} {'p50 (s)':>8} {'p50 step (s)':>13}")
    previous = 0.0
    for stage in (*STAGES, "console"):
        values = [r[stage] for r in rounds if stage in r]
        p50 = _p50(values)
        step = p50 - previous if stage != "console" else float("nan")
        print(f"{stage:<16} {p50:>8.2f} {step:>13.2f}")
        if stage != "console":
            previous = p50
    cluster_p50 = _p50([r["marker"] for r in rounds if "marker" in r])
    bare_p50 = _p50(bare)
    print(
        f"\ncluster (kubectl create VMI -> marker)  p50 {cluster_p50:.2f}s over {len(rounds)} rounds"
    )
    print(f"bare qemu -kernel -initrd -> marker      p50 {bare_p50:.2f}s over {len(bare)} rounds")
    print(f"ratio cluster / bare                     {cluster_p50 / bare_p50:.2f}x")
    _print_writes(counted)
    n = max(len(rounds), 1)
    print("\nwrites the apiserver served per VMI start, every client (mean over the rounds):")
    for (resource, sub, verb, code), value in sorted(cluster_wide.items()):
        what = f"{resource}/{sub}" if sub else resource
        print(f"  {what:<40} {verb:<8} {code:<4} {value / n:5.1f}")
    return 0


def _print_writes(counted: list[RoundWrites]) -> None:
    """kubevirt-py's writes per start, and every client's, from the audit log."""
    if not any(r.to_running for r in counted):
        print("\nno audited writes: is the apiserver's audit log on (kv-cluster up)?")
        return
    to_running = [len(_ours(r.to_running)) for r in counted]
    after = [len(_ours(r.after_running)) for r in counted]
    every = [w for r in counted for w in (*r.to_running, *r.after_running)]
    refused = [w for w in _ours(every) if w.code >= 400]
    idle = [w for w in _ours(every) if w.changed_nothing]
    print(
        f"\nkubevirt-py API writes per VMI start, to Running: p50 {_p50(to_running):.0f}"
        f" {sorted(to_running)}; after Running until the delete: p50 {_p50(after):.0f}"
        f" {sorted(after)}"
    )
    print(f"  refused (code >= 400): {len(refused)}; changed nothing: {len(idle)}")
    n = len(counted)
    for label, part in (
        ("to Running", [w for r in counted for w in r.to_running]),
        ("after Running", [w for r in counted for w in r.after_running]),
    ):
        print(f"\nwrites to the round's VMI and pod {label}, every client (mean per start):")
        tally = Counter((_who(w.user), w.resource, w.verb, w.code, w.changed_nothing) for w in part)
        for (who, resource, verb, code, nothing), value in sorted(tally.items()):
            note = " (changed nothing)" if nothing else ""
            print(f"  {who:<28} {resource:<32} {verb:<7} {code:<4} {value / n:4.1f}{note}")


if __name__ == "__main__":
    raise SystemExit(main())
