"""In-cluster clients reach the `kubernetes` Service by name; other names get no answer."""

from __future__ import annotations

import json
from typing import Any

_CLIENT = """
import json, socket, ssl, urllib.request
sa = "/var/run/secrets/kubernetes.io/serviceaccount"
ctx = ssl.create_default_context(cafile=sa + "/ca.crt")
with urllib.request.urlopen("https://kubernetes.default.svc/version", context=ctx, timeout=5) as r:
    version = json.load(r)["gitVersion"]
try:
    socket.getaddrinfo("example.com", 443)
    outside = "resolved"
except socket.gaierror as exc:
    outside = "refused"
print(json.dumps({"version": version, "ip": socket.gethostbyname("kubernetes.default"), "outside": outside}))
"""


def test_pod_reaches_the_kubernetes_service_through_cluster_dns(
    node_cluster: Any, node_namespace: str
) -> None:
    node_cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "client", "namespace": node_namespace},
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "client",
                        "image": node_cluster.images["python-base"].ref,
                        "imagePullPolicy": "Never",
                        "command": ["python3", "-c", _CLIENT],
                    }
                ],
            },
        },
    )

    def phase() -> str | None:
        pod = node_cluster.kubectl.json("get", "pod", "client", "-n", node_namespace)
        p = pod["status"].get("phase")
        return p if p in ("Succeeded", "Failed") else None

    final = node_cluster.wait_for(phase, 90, "pod client to finish")
    logs = node_cluster.kubectl.run("logs", "client", "-n", node_namespace).stdout
    assert final == "Succeeded", logs
    result = json.loads(logs.strip().splitlines()[-1])
    assert result["version"] == "v1.37.2"
    assert result["ip"] == node_cluster.cluster.config.kubernetes_service_ip
    assert result["outside"] == "refused"
