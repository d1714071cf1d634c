"""The aggregation layer proxies to an API server on the host, authenticating as the front
proxy (client cert from the front-proxy CA) and passing the user in X-Remote-User."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable
from typing import Any

from kv_cluster import Kubectl
from kv_cluster.credentials import FRONT_PROXY_CLIENT_CN


def _aggregated(group: str) -> Callable[..., tuple[int, Any]]:
    def handle(
        method: str, path: str, headers: dict[str, str], body: bytes, cn: str | None
    ) -> tuple[int, Any]:
        if cn != FRONT_PROXY_CLIENT_CN:
            return 401, {"kind": "Status", "message": f"client {cn} is not the front proxy"}
        if path.split("?")[0] == f"/apis/{group}/v1alpha1":
            return 200, {
                "kind": "APIResourceList",
                "apiVersion": "v1",
                "groupVersion": f"{group}/v1alpha1",
                "resources": [],
            }
        if path.startswith(f"/apis/{group}/v1alpha1/whoami"):
            return 200, {
                "user": headers.get("X-Remote-User"),
                "groups": headers.get("X-Remote-Group", "").split(", "),
            }
        return 404, {"kind": "Status", "message": f"{path} not found"}

    return handle


def test_an_aggregated_api_on_the_host_sees_the_callers_identity(
    kube: Any, kubectl: Kubectl, namespace: str, host_server: Callable[..., Any]
) -> None:
    cluster = kube.require_local()
    host = cluster.config.host_ip
    group = f"{namespace}.kubevirt-py.test"
    server = host_server(
        host,
        f"agg.{namespace}.svc",
        _aggregated(group),
        client_ca=cluster.layout.pki / "front-proxy-ca.crt",
    )
    kubectl.run(
        "apply",
        "-f",
        "-",
        stdin=json.dumps(
            {
                "apiVersion": "v1",
                "kind": "List",
                "items": [
                    {
                        "apiVersion": "v1",
                        "kind": "Service",
                        "metadata": {"name": "agg", "namespace": namespace},
                        "spec": {
                            "ports": [{"name": "https", "port": 443, "targetPort": server.port}]
                        },
                    },
                    {
                        "apiVersion": "discovery.k8s.io/v1",
                        "kind": "EndpointSlice",
                        "metadata": {
                            "name": "agg-host",
                            "namespace": namespace,
                            "labels": {"kubernetes.io/service-name": "agg"},
                        },
                        "addressType": "IPv4",
                        "endpoints": [{"addresses": [host], "conditions": {"ready": True}}],
                        "ports": [{"name": "https", "port": server.port, "protocol": "TCP"}],
                    },
                ],
            }
        ),
    )
    apiservice = f"v1alpha1.{group}"
    kubectl.run(
        "apply",
        "-f",
        "-",
        stdin=json.dumps(
            {
                "apiVersion": "apiregistration.k8s.io/v1",
                "kind": "APIService",
                "metadata": {"name": apiservice},
                "spec": {
                    "group": group,
                    "version": "v1alpha1",
                    "service": {"namespace": namespace, "name": "agg", "port": 443},
                    "caBundle": base64.b64encode(server.ca_pem).decode(),
                    "groupPriorityMinimum": 1000,
                    "versionPriority": 15,
                },
            }
        ),
    )
    try:
        _wait_available(kubectl, apiservice)
        whoami = json.loads(kubectl.run("get", "--raw", f"/apis/{group}/v1alpha1/whoami").stdout)
        assert whoami["user"] == "kubernetes-admin"
        assert "system:masters" in whoami["groups"]
    finally:
        kubectl.run("delete", "apiservice", apiservice, check=False)


def _wait_available(kubectl: Kubectl, apiservice: str) -> None:
    deadline = time.monotonic() + 60
    conditions: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        conditions = (
            kubectl.json("get", "apiservice", apiservice).get("status", {}).get("conditions", [])
        )
        if any(c["type"] == "Available" and c["status"] == "True" for c in conditions):
            return
        time.sleep(0.5)
    raise AssertionError(f"APIService {apiservice} never became Available: {conditions}")
