"""Fuzz the running virt-api's webhook endpoints over TLS: no 5xx, every 200 a valid review."""

from __future__ import annotations

import http.client
import json
import ssl
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

PATHS = [
    "/virtualmachineinstances-validate-create",
    "/virtualmachineinstances-validate-update",
    "/virtualmachineinstances-mutate",
    "/virtualmachines-validate",
    "/virtualmachines-mutate",
    "/migration-validate-create",
    "/status-validate",
]
KINDS = ["VirtualMachineInstance", "VirtualMachine", "VirtualMachineInstanceMigration", "Pod"]
KEYS = st.sampled_from(
    [
        "spec",
        "domain",
        "devices",
        "disks",
        "volumes",
        "name",
        "bus",
        "disk",
        "resources",
        "requests",
        "memory",
        "template",
        "runStrategy",
        "running",
        "vmiName",
        "networks",
        "pod",
        "interfaces",
    ]
)
VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 5)
    | st.text(max_size=6)
    | st.sampled_from(["1Gi", "virtio", "Always"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=25,
)
REVIEWS = st.fixed_dictionaries(
    {
        "apiVersion": st.just("admission.k8s.io/v1"),
        "kind": st.just("AdmissionReview"),
        "request": st.fixed_dictionaries(
            {
                "uid": st.text(min_size=1, max_size=8),
                "kind": st.fixed_dictionaries(
                    {
                        "group": st.just("kubevirt.io"),
                        "version": st.just("v1"),
                        "kind": st.sampled_from(KINDS),
                    }
                ),
                "resource": st.fixed_dictionaries({"resource": st.just("x")}),
                "operation": st.sampled_from(["CREATE", "UPDATE"]),
                "namespace": st.just("default"),
                "object": st.dictionaries(
                    st.sampled_from(["spec", "metadata", "status"]), VALUES, max_size=3
                ),
                "oldObject": st.dictionaries(
                    st.sampled_from(["spec", "metadata"]), VALUES, max_size=2
                ),
            }
        ),
    }
)


def test_live_webhooks_never_fail(virt_api: Any) -> None:
    context = ssl.create_default_context(cafile=str(virt_api.ca))
    context.check_hostname = False  # dialled by address; the certificate names the Service

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(path=st.sampled_from(PATHS), review=REVIEWS | VALUES)
    def post(path: str, review: Any) -> None:
        conn = http.client.HTTPSConnection(
            virt_api.host, virt_api.port, context=context, timeout=10
        )
        try:
            conn.request(
                "POST", path, body=json.dumps(review), headers={"Content-Type": "application/json"}
            )
            response = conn.getresponse()
            body = json.loads(response.read())
        finally:
            conn.close()
        assert response.status in (200, 400), (response.status, body)
        if response.status == 200:
            assert body["apiVersion"] == "admission.k8s.io/v1"
            assert body["kind"] == "AdmissionReview"
            assert body["response"]["uid"] == review["request"]["uid"]
            assert isinstance(body["response"]["allowed"], bool)

    post()
