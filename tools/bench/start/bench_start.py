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
- API writes per VMI start: the growth of non-GET requests in the
  ``kubevirt_rest_client_requests_total`` of virt-controller and virt-handler, plus the
  create itself (other sessions sharing the cluster add noise; run on a quiet cluster),
  printed by component, resource, verb and code; and, cluster-wide, the growth of the
  apiserver's own ``apiserver_request_total`` writes by resource, subresource and verb
  (these include the kubelet's pod status and the scheduler's binding).

Ratio = p50(cluster to marker) ÷ p50(bare to marker).
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
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from kv_cluster import Cluster
from kv_cluster.kubectl import Kubectl
from kv_cluster.nodes import node_specs
from kv_cluster.virt_node import CONTROLLER_PORT_OFFSET, VirtHandler
from kv_images.guest import GUEST_MARKER

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "launcher"))
from start import bare_qemu, tiny_guest

__all__ = ["main"]

STAGES = ("admission", "pod created", "pod scheduled", "launcher ready", "domain started", "marker")
_WRITE = re.compile(r"^kubevirt_rest_client_requests_total\{([^}]*)\} ([0-9.e+]+)$", re.MULTILINE)
_APISERVER = re.compile(r"^apiserver_request_total\{([^}]*)\} ([0-9.e+]+)$", re.MULTILINE)
_LABEL = re.compile(r'(\w+)="([^"]*)"')
_READS = ("GET", "WATCH", "LIST")
Tally = dict[tuple[str, ...], float]


def _writes(url: str) -> Tally:
    """Non-read requests of one component, by (resource, verb, code)."""
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            text = r.read().decode()
    except OSError:
        return {}
    tally: Tally = {}
    for labels, value in _WRITE.findall(text):
        found = dict(_LABEL.findall(labels))
        if found.get("method", "GET") not in _READS:
            at = (found.get("resource", "?"), found.get("verb", "?"), found.get("code", "?"))
            tally[at] = tally.get(at, 0.0) + float(value)
    return tally


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


def _metrics_urls(kubectl: Kubectl, controller_port: int, handler: VirtHandler) -> list[str]:
    """/metrics of virt-controller and virt-handler: host processes, or the kubevirt pods
    (plain HTTP on 8443; virt-api's TLS port is skipped: it writes nothing per start)."""
    pods = json.loads(
        kubectl.run("get", "pods", "-n", "kubevirt", "-o", "json", check=False).stdout or "{}"
    ).get("items", [])
    urls = [
        f"http://{p['status']['podIP']}:8443/metrics"
        for p in pods
        if p.get("status", {}).get("podIP")
        and p["metadata"].get("labels", {}).get("kubevirt.io")
        in ("virt-controller", "virt-handler")
    ]
    return urls or [
        f"http://127.0.0.1:{controller_port}/metrics",
        f"http://127.0.0.1:{handler.metrics_port}/metrics",
    ]


def _vmi(name: str, namespace: str, node: str) -> dict[str, Any]:
    """The kernel-boot VMI, on `node` (the one whose pod directories the round watches)."""
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstance",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node},
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


class ClusterRound:
    """One VMI start, observed stage by stage."""

    def __init__(self, kubectl: Kubectl, pods_dir: Path, namespace: str, node: str) -> None:
        self.kubectl = kubectl
        self.pods_dir = pods_dir
        self.namespace = namespace
        self.node = node

    def _get(self, *args: str) -> dict[str, Any] | None:
        found = self.kubectl.run(*args, "-n", self.namespace, "-o", "json", check=False)
        return json.loads(found.stdout) if found.returncode == 0 else None

    def run(self, kubeconfig: Path) -> dict[str, float]:
        name = f"bench-{uuid.uuid4().hex[:6]}"
        body = json.dumps(_vmi(name, self.namespace, self.node))
        t0 = time.monotonic()
        self.kubectl.run("create", "-f", "-", stdin=body)
        seen: dict[str, float] = {"admission": time.monotonic() - t0}
        pod_uid = vmi_uid = ""
        deadline = t0 + 300
        while "marker" not in seen and time.monotonic() < deadline:
            now = time.monotonic() - t0
            if "pod scheduled" not in seen:
                pods = self._get("get", "pods", "-l", "kubevirt.io=virt-launcher")
                for pod in (pods or {}).get("items", []):
                    if pod["metadata"].get("labels", {}).get("vm.kubevirt.io/name") == name:
                        seen.setdefault("pod created", now)
                        pod_uid = pod["metadata"]["uid"]
                        if pod["spec"].get("nodeName"):
                            seen["pod scheduled"] = now
            volumes = self.pods_dir / pod_uid / "volumes" / "kubernetes.io~empty-dir"
            socket = volumes / "sockets" / "launcher-sock"
            if pod_uid and "launcher ready" not in seen and socket.is_socket():
                seen["launcher ready"] = now
            if "launcher ready" in seen and "domain started" not in seen:
                vmi = self._get("get", "vmi", name)
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
            time.sleep(0.02)
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
        self.kubectl.run("delete", "vmi", name, "-n", self.namespace, "--wait=false", check=False)
        return seen


def _p50(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def main(argv: list[str] | None = None) -> int:
    """Run the rounds and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    cluster = Cluster.from_env(progress=sys.stderr)
    ctx = cluster._context()
    node = node_specs(ctx.config, ctx.layout, 1)[0]
    handler = VirtHandler(ctx, node)
    kubectl = Kubectl(cluster.kubeconfig)
    namespace = f"kv-bench-start-{uuid.uuid4().hex[:4]}"
    kubectl.run("create", "namespace", namespace)
    urls = _metrics_urls(kubectl, ctx.config.ports.base + CONTROLLER_PORT_OFFSET, handler)
    rounds: list[dict[str, float]] = []
    writes: list[float] = []
    by_component: dict[str, Tally] = {}
    cluster_wide: Tally = {}
    try:
        for index in range(args.rounds):
            before = {u: _writes(u) for u in urls}
            served = _apiserver_writes(kubectl)
            seen = ClusterRound(kubectl, node.kubelet_root / "pods", namespace, node.name).run(
                cluster.kubeconfig
            )
            # Writes of this start (status patches settle within a second of Running;
            # the round's own delete comes after the last reading).
            grown = {u: _growth(before[u], _writes(u)) for u in urls}
            for url, tally in grown.items():
                into = by_component.setdefault(url, {})
                for at, value in tally.items():
                    into[at] = into.get(at, 0.0) + value
            for at, value in _growth(served, _apiserver_writes(kubectl)).items():
                cluster_wide[at] = cluster_wide.get(at, 0.0) + value
            writes.append(sum(sum(t.values()) for t in grown.values()) + 1)  # + the create
            rounds.append(seen)
            print(
                f"round {index + 1}: " + ", ".join(f"{k} {v:.2f}s" for k, v in seen.items()),
                flush=True,
            )
    finally:
        kubectl.run("delete", "namespace", namespace, "--wait=false", check=False)
    vmlinuz, initrd = tiny_guest()
    bare = [asyncio.run(bare_qemu(vmlinuz, initrd)) for _ in range(args.rounds)]
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
    print(f"ratio cluster / bare                     {cluster_p50 / bare_p50:.1f}x")
    print(
        f"API writes per VMI start (controller + handler + create): p50 {_p50(writes):.0f} {sorted(writes)}"
    )
    n = max(len(rounds), 1)
    print("\nwrites per VMI start, by component (mean over the rounds):")
    for url, tally in by_component.items():
        for (resource, verb, code), value in sorted(tally.items()):
            print(f"  {url:<40} {resource:<28} {verb:<8} {code:<4} {value / n:5.1f}")
    print("\nwrites the apiserver served per VMI start, every client (mean over the rounds):")
    for (resource, sub, verb, code), value in sorted(cluster_wide.items()):
        what = f"{resource}/{sub}" if sub else resource
        print(f"  {what:<40} {verb:<8} {code:<4} {value / n:5.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
