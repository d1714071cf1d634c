"""Pod create -> Running on the local node, for a tiny pod (printed, never judged).

Run: ``uv run python tools/bench/node/pod_start.py [--rounds N]`` with the local cluster up
(`kv-cluster up`; KV_CLUSTER_* variables select another one).

Each round creates one pod from the node's pause image (already in containerd, so no
pull) with the API, polls it until `status.phase` is Running, and deletes it. The clock
runs from the POST to the first GET that shows Running (polled every 20 ms).
"""

from __future__ import annotations

import argparse
import http.client
import json
import ssl
import statistics
import sys
import time
import uuid
from typing import Any

from kv_cluster import Cluster
from kv_cluster.credentials import ensure_credentials
from kv_images import Builder, Layout, Progress, find_workspace


class Api:
    def __init__(self, cluster: Cluster) -> None:
        creds = ensure_credentials(cluster.config, cluster.layout)
        self.ctx = ssl.create_default_context(cafile=str(creds.ca.paths.cert))
        self.ctx.load_cert_chain(str(creds.admin.cert), str(creds.admin.key))
        self.host = cluster.config.host_ip
        self.port = cluster.config.ports.apiserver

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
        conn = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=10)
        try:
            data = json.dumps(body).encode() if body is not None else None
            conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            return resp.status, json.loads(resp.read() or b"null")
        finally:
            conn.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    cluster = Cluster.from_env(progress=sys.stderr)
    if not cluster.exists:
        print("no local cluster: run `uv run kv-cluster up` first", file=sys.stderr)
        return 1
    [pause] = Builder(find_workspace(), Layout.default(), Progress()).build(["pause"])
    api = Api(cluster)
    ns = f"kv-bench-{uuid.uuid4().hex[:6]}"
    api.call("POST", "/api/v1/namespaces", {"metadata": {"name": ns}})
    times: list[float] = []
    try:
        for i in range(args.rounds):
            pod = {
                "metadata": {"name": f"tiny-{i}"},
                "spec": {
                    "terminationGracePeriodSeconds": 0,
                    "containers": [
                        {"name": "pause", "image": pause.ref, "imagePullPolicy": "Never"}
                    ],
                },
            }
            start = time.monotonic()
            status, reply = api.call("POST", f"/api/v1/namespaces/{ns}/pods", pod)
            if status != 201:
                print(f"create failed: HTTP {status} {reply}", file=sys.stderr)
                return 1
            deadline = start + 120
            while time.monotonic() < deadline:
                _, got = api.call("GET", f"/api/v1/namespaces/{ns}/pods/tiny-{i}")
                if got.get("status", {}).get("phase") == "Running":
                    times.append(time.monotonic() - start)
                    break
                time.sleep(0.02)
            else:
                print(f"tiny-{i} not Running within 120 s", file=sys.stderr)
                return 1
            api.call("DELETE", f"/api/v1/namespaces/{ns}/pods/tiny-{i}")
    finally:
        api.call("DELETE", f"/api/v1/namespaces/{ns}")
    print(f"pod create -> Running over {len(times)} rounds (pause image, no pull):")
    print(
        f"  median {statistics.median(times):.2f} s, min {min(times):.2f} s, max {max(times):.2f} s"
    )
    print("  each: " + ", ".join(f"{t:.2f}" for t in times))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
