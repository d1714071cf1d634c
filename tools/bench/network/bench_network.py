"""Guest networking on the local cluster: DHCP lease time and TCP throughput (printed, never judged).

Run: ``uv run python tools/bench/network/bench_network.py [--mib N] [--rounds R]`` against a
cluster brought up by ``uv run kv-cluster up`` (node, virt-api, virt-controller,
virt-handler) with the images built (``uv run kv-images build virt-launcher
guest-kernel-boot``). It makes its own namespace and deletes it at the end.

- lease: the guest's kernel start → the DHCP lease applied, from the guest's own clock
  (the `uptime=` of its `KUBEVIRT-PY-GUEST-LEASE` console line), and the ready marker's
  arrival after VMI Running as seen by `virtctl console`.
- throughput: a client pod (the virt-launcher image, python3) connects, sends N MiB,
  half-closes and waits for the peer to close, i.e. until everything was received:
  * pod → guest: to the VMI's pod IP (masquerade DNAT → tap → guest), where the guest
    sinks with busybox `nc -l -p 5001 < /dev/null > /dev/null`, started by typing into
    its console (stdin from /dev/null: a background job reading the console is stopped);
  * pod → pod: to a second pod on the same node sinking with python3.
  The ratio is pod→guest ÷ pod→pod throughput (TCG makes the guest the slow end).
"""

from __future__ import annotations

import argparse
import json
import secrets
import statistics
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

from kv_cluster import Cluster
from kv_cluster.kubectl import Kubectl
from kv_images.guest import GUEST_MARKER, GuestLease

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "start"))
from bench_start import kernel_boot_vmi as start_bench_vmi

__all__ = ["main"]

IMAGE = "kubevirt-py/virt-launcher:devel"
PORT = 5001

_SEND = textwrap.dedent(
    """
    import socket, sys, time
    host, port, mib = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    chunk = b"\\0" * (1 << 20)
    deadline = time.monotonic() + 60
    while True:
        try:
            s = socket.create_connection((host, port), timeout=10)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    s.settimeout(300)
    start = time.monotonic()
    for _ in range(mib):
        s.sendall(chunk)
    s.shutdown(socket.SHUT_WR)
    while s.recv(65536):
        pass
    print(f"SECONDS {time.monotonic() - start:.4f}")
    """
)

_SINK = textwrap.dedent(
    f"""
    import socket
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", {PORT}))
    srv.listen(1)
    while True:
        conn, _ = srv.accept()
        while conn.recv(1 << 20):
            pass
        conn.close()
    """
)


def _vm(name: str, namespace: str) -> dict[str, Any]:
    """The start bench's kernel-boot VMI, with one masquerade interface (all ports forwarded)."""
    vmi = start_bench_vmi(name, namespace)
    vmi["metadata"]["labels"] = {"kubevirt.io/vm": name}
    vmi["spec"]["domain"]["devices"] = {"interfaces": [{"name": "default", "masquerade": {}}]}
    vmi["spec"]["networks"] = [{"name": "default", "pod": {}}]
    return vmi


def _pod(name: str, script: str, node: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "terminationGracePeriodSeconds": 0,
        "containers": [
            {
                "name": name,
                "image": IMAGE,
                "imagePullPolicy": "IfNotPresent",
                "command": ["python3", "-c", script],
            }
        ],
    }
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


class Bench:
    """The namespace, its objects and the calls the rounds make."""

    def __init__(self, kubectl: Kubectl, kubeconfig: Path, namespace: str) -> None:
        self.kubectl = kubectl
        self.kubeconfig = kubeconfig
        self.namespace = namespace

    def get(self, kind: str, name: str) -> dict[str, Any] | None:
        found = self.kubectl.run("get", kind, name, "-n", self.namespace, "-o", "json", check=False)
        return json.loads(found.stdout) if found.returncode == 0 else None

    def create(self, body: dict[str, Any]) -> None:
        self.kubectl.run("create", "-n", self.namespace, "-f", "-", stdin=json.dumps(body))

    def wait(self, what: str, check: Any, timeout: float) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if found := check():
                return found
            time.sleep(0.1)
        raise TimeoutError(f"timed out after {timeout:g}s waiting for {what}")

    def console(self, name: str, until: str, typed: str | None = None) -> str:
        proc = subprocess.run(
            [
                sys.executable, "-m", "virtctl", "console", name, "-n", self.namespace,
                f"--until={until}", "--timeout-seconds=120", f"--kubeconfig={self.kubeconfig}",
            ],
            input=typed, capture_output=True, text=True, timeout=180, check=False,
        )  # fmt: skip
        if proc.returncode != 0:
            raise RuntimeError(f"virtctl console failed: {proc.stderr.strip()}")
        return proc.stdout

    def pod_ip(self, name: str) -> str:
        return str(
            self.wait(
                f"pod {name} Running with an IP",
                lambda: (
                    (p.get("status") or {}).get("podIP")
                    if (p := self.get("pod", name))
                    and (p.get("status") or {}).get("phase") == "Running"
                    else None
                ),
                180,
            )
        )

    def send(self, host: str, mib: int) -> float | None:
        proc = self.kubectl.run(
            "exec", "-n", self.namespace, "client", "--", "python3", "-c", _SEND,
            host, str(PORT), str(mib), check=False, timeout=600,
        )  # fmt: skip
        for line in proc.stdout.splitlines():
            if line.startswith("SECONDS "):
                return float(line.split()[1])
        print(f"  send to {host} failed: {proc.stderr.strip()[-300:]}", file=sys.stderr)
        return None


def _mib_per_s(mib: int, seconds: list[float]) -> float:
    return mib / statistics.median(seconds) if seconds else float("nan")


def main(argv: list[str] | None = None) -> int:
    """Boot the guest, time its lease, measure both paths, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mib", type=int, default=64, help="MiB sent per round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    cluster = Cluster.from_env(progress=sys.stderr)
    kubectl = Kubectl(cluster.kubeconfig)
    namespace = f"kv-bench-net-{uuid.uuid4().hex[:4]}"
    kubectl.run("create", "namespace", namespace)
    bench = Bench(kubectl, cluster.kubeconfig, namespace)
    try:
        t0 = time.monotonic()
        bench.create(_vm("netbench", namespace))
        vmi = bench.wait(
            "VMI netbench Running with an interface IP",
            lambda: (
                v
                if (v := bench.get("vmi", "netbench"))
                and (v.get("status") or {}).get("phase") == "Running"
                and ((v["status"].get("interfaces") or [{}])[0]).get("ipAddress")
                else None
            ),
            300,
        )
        running = time.monotonic() - t0
        console = bench.console("netbench", GUEST_MARKER)
        ready = time.monotonic() - t0
        lease = GuestLease.from_console(console)
        guest_ip = vmi["status"]["interfaces"][0]["ipAddress"]
        node = vmi["status"].get("nodeName")

        # The guest's sink: one connection per nc, restarted for the next round.
        token = secrets.token_hex(3)
        bench.console(
            "netbench",
            f"SINK-{token}-2",
            f"\n(while true; do nc -l -p {PORT} < /dev/null > /dev/null; done) & echo SINK-{token}-$((1+1))\n",
        )
        bench.create(_pod("sink", _SINK, node))
        bench.create(_pod("client", "import time; time.sleep(3600)", node))
        sink_ip = bench.pod_ip("sink")
        bench.pod_ip("client")

        to_guest: list[float] = []
        to_pod: list[float] = []
        for index in range(args.rounds):
            g = bench.send(guest_ip, args.mib)
            p = bench.send(sink_ip, args.mib)
            if g is not None:
                to_guest.append(g)
            if p is not None:
                to_pod.append(p)
            print(
                f"round {index + 1}: pod->guest {g if g is not None else float('nan'):.2f}s, "
                f"pod->pod {p if p is not None else float('nan'):.2f}s for {args.mib} MiB",
                flush=True,
            )
    finally:
        kubectl.run("delete", "namespace", namespace, "--wait=false", check=False)

    print()
    if lease is not None and lease.uptime is not None:
        print(f"guest kernel start -> DHCP lease applied   {lease.uptime:.2f}s (guest clock)")
        print(f"lease                                      {lease.address} via {lease.routers}")
    else:
        print("guest printed no lease line before its ready marker")
    print(f"kubectl create VMI -> Running with an IP   {running:.2f}s")
    print(f"kubectl create VMI -> ready marker         {ready:.2f}s (virtctl console returned)")
    guest_rate = _mib_per_s(args.mib, to_guest)
    pod_rate = _mib_per_s(args.mib, to_pod)
    print(
        f"pod -> guest (pod IP, masquerade)          {guest_rate:8.1f} MiB/s  p50 of {len(to_guest)}"
    )
    print(f"pod -> pod (same node)                     {pod_rate:8.1f} MiB/s  p50 of {len(to_pod)}")
    print(f"ratio pod->guest / pod->pod                {guest_rate / pod_rate:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
