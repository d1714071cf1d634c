"""The apiserver reaches an admission webhook served by a process on the host, through a
Service whose EndpointSlice names the cluster's host address: no kube-proxy involved."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable
from typing import Any

from kv_cluster import Kubectl

_DENIAL = "configmaps labelled verdict=deny are refused by the test webhook"


def _review(
    method: str, path: str, headers: dict[str, str], body: bytes, cn: str | None
) -> tuple[int, Any]:
    review = json.loads(body)
    request = review["request"]
    labels = request["object"]["metadata"].get("labels") or {}
    allowed = labels.get("verdict") != "deny"
    response: dict[str, Any] = {"uid": request["uid"], "allowed": allowed}
    if not allowed:
        response["status"] = {"code": 403, "message": _DENIAL}
    return 200, {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": response,
    }


def _service_to_host(kubectl: Kubectl, namespace: str, name: str, host: str, port: int) -> None:
    """A selector-less Service plus a hand-written EndpointSlice pointing at host:port."""
    docs = [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"ports": [{"name": "https", "port": 443, "targetPort": port}]},
        },
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": f"{name}-host",
                "namespace": namespace,
                "labels": {"kubernetes.io/service-name": name},
            },
            "addressType": "IPv4",
            "endpoints": [{"addresses": [host], "conditions": {"ready": True}}],
            "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
        },
    ]
    kubectl.run("apply", "-f", "-", stdin="\n---\n".join(json.dumps(d) for d in docs))


def test_a_validating_webhook_on_the_host_is_called(
    kube: Any, kubectl: Kubectl, namespace: str, host_server: Callable[..., Any]
) -> None:
    cluster = kube.require_local()
    host = cluster.config.host_ip
    server = host_server(host, f"hook.{namespace}.svc", _review)
    _service_to_host(kubectl, namespace, "hook", host, server.port)
    config_name = f"{namespace}-hook"
    webhook = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": config_name},
        "webhooks": [
            {
                "name": "deny.kubevirt-py.test",
                "clientConfig": {
                    "service": {
                        "namespace": namespace,
                        "name": "hook",
                        "path": "/validate",
                        "port": 443,
                    },
                    "caBundle": base64.b64encode(server.ca_pem).decode(),
                },
                "rules": [
                    {
                        "operations": ["CREATE"],
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "resources": ["configmaps"],
                    }
                ],
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "failurePolicy": "Fail",
                "timeoutSeconds": 5,
            }
        ],
    }
    kubectl.run("apply", "-f", "-", stdin=json.dumps(webhook))
    try:
        denied = _wait_for_denial(kubectl, namespace)
        assert _DENIAL in denied
        accepted = kubectl.run(
            "create", "configmap", "fine", "-n", namespace, "--dry-run=server", check=False
        )
        assert accepted.returncode == 0, accepted.stderr
        assert any(r.startswith("POST /validate") for r in server.requests)
    finally:
        kubectl.run("delete", "validatingwebhookconfiguration", config_name, check=False)


def _wait_for_denial(kubectl: Kubectl, namespace: str) -> str:
    # The apiserver picks up a new webhook configuration from its informer: poll for it.
    manifest = json.dumps(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "refused", "namespace": namespace, "labels": {"verdict": "deny"}},
        }
    )
    deadline = time.monotonic() + 30
    last = ""
    while time.monotonic() < deadline:
        out = kubectl.run("create", "--dry-run=server", "-f", "-", stdin=manifest, check=False)
        if out.returncode != 0:
            return out.stderr
        last = out.stdout
        time.sleep(0.5)
    raise AssertionError(f"the webhook never refused the configmap (last answer: {last})")
