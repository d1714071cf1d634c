"""Fuzz the webhook endpoints: no 5xx, and every 200 carries a valid AdmissionReview."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp.test_utils import TestClient, TestServer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from virt_api import FrontProxyConfig, SubresourceContext, build_app
from virt_api.webhooks import WEBHOOKS

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=30,
)
# Objects that look like KubeVirt specs, so the rules (not just the parser) get exercised.
spec_keys = st.sampled_from(
    [
        "domain",
        "devices",
        "disks",
        "volumes",
        "networks",
        "interfaces",
        "resources",
        "requests",
        "memory",
        "cpu",
        "firmware",
        "bootloader",
        "efi",
        "name",
        "bus",
        "disk",
        "pod",
        "masquerade",
        "template",
        "spec",
        "runStrategy",
        "running",
        "hostname",
        "dnsConfig",
        "cloudInitNoCloud",
        "userData",
        "bootOrder",
        "selector",
    ]
)
kubeish = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.text(max_size=8)
    | st.sampled_from(["virtio", "1Gi", "Halted", "x/../y"]),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(spec_keys, children, max_size=4)
    ),
    max_leaves=40,
)


def reviews() -> st.SearchStrategy[Any]:
    request = st.fixed_dictionaries(
        {
            "uid": st.text(min_size=1, max_size=10),
            "kind": st.fixed_dictionaries(
                {
                    "group": st.just("kubevirt.io"),
                    "version": st.just("v1"),
                    "kind": st.sampled_from(sorted({k for w in WEBHOOKS for k in w.kinds})),
                }
            ),
            "resource": st.fixed_dictionaries({"resource": st.text(max_size=10)}),
            "operation": st.sampled_from(["CREATE", "UPDATE", "DELETE", "CONNECT", "X"]),
            "object": st.dictionaries(
                st.sampled_from(["spec", "metadata", "status", "kind"]), kubeish, max_size=4
            ),
        },
        optional={"oldObject": kubeish, "userInfo": json_values, "dryRun": json_values},
    )
    envelope = st.fixed_dictionaries(
        {
            "apiVersion": st.just("admission.k8s.io/v1"),
            "kind": st.just("AdmissionReview"),
            "request": request,
        }
    )
    return envelope | json_values


def check(status: int, body: Any, sent: Any) -> None:
    assert status in (200, 400), (status, body)
    if status == 200:
        assert body["apiVersion"] == "admission.k8s.io/v1"
        assert body["kind"] == "AdmissionReview"
        response = body["response"]
        assert isinstance(response["allowed"], bool)
        assert response["uid"] == sent["request"]["uid"]
        if not response["allowed"]:
            assert response["status"]["message"]
            assert response["status"]["code"] != 500, response["status"]["message"]


@settings(
    max_examples=int(__import__("os").environ.get("FUZZ_EXAMPLES", "300")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(path=st.sampled_from([w.path for w in WEBHOOKS]), review=reviews())
def test_webhooks_never_fail(
    path: str, review: Any, new_fake_api: Any, admission: Any, no_handler: Any
) -> None:
    async def run() -> None:
        async with new_fake_api().running() as api:
            app = build_app(admission(), SubresourceContext(api, FrontProxyConfig(), no_handler))
            await post(app)

    async def post(app: Any) -> None:
        async with TestClient(TestServer(app)) as client:
            response = await client.post(
                path, data=json.dumps(review), headers={"Content-Type": "application/json"}
            )
            check(response.status, await response.json(), review)

    asyncio.run(run())
