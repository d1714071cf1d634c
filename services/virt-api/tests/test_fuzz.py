"""Fuzz every webhook in-process: no 5xx, and every answer a valid AdmissionReview.

Reviews are random JSON, random envelopes, and upstream's example manifests with random
edits (so the rules, not only the parser, are exercised). One app and one client serve a
whole run. FUZZ_REVIEWS sets the reviews per webhook (default 100; CI's security step
sets 10000); the figures are printed (`-s` shows them).
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp.test_utils import TestClient, TestServer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from virt_api import FrontProxyConfig, SubresourceContext, build_app
from virt_api.webhooks import WEBHOOKS, Webhook

REVIEWS_PER_WEBHOOK = int(os.environ.get("FUZZ_REVIEWS", "100"))
EXAMPLES = Path(__file__).resolve().parents[3] / "compat" / "upstream-kubevirt" / "examples"

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
        "kernelBoot",
        "container",
        "kernelPath",
        "hostDisk",
        "path",
        "containerDisk",
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
    | st.sampled_from(["virtio", "1Gi", "Halted", "x/../y", "/a/../../etc/shadow", "-1"]),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(spec_keys, children, max_size=4)
    ),
    max_leaves=40,
)


def _examples() -> dict[str, list[dict[str, Any]]]:
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for path in sorted(EXAMPLES.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and isinstance(doc.get("kind"), str):
                by_kind.setdefault(doc["kind"], []).append(doc)
    return by_kind


EXAMPLE_OBJECTS = _examples()


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(value, dict):
        for key, child in value.items():
            yield from _paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from _paths(child, (*prefix, index))


@st.composite
def edited(draw: st.DrawFn, kind: str) -> Any:
    """An upstream example of `kind` with a few random edits (replace, delete, insert)."""
    seeds = EXAMPLE_OBJECTS.get(kind)
    if not seeds:
        return draw(st.dictionaries(st.sampled_from(["spec", "metadata"]), kubeish, max_size=3))
    obj = copy.deepcopy(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(1, 4))):
        paths = [p for p in _paths(obj) if p]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = obj
        for step in path[:-1]:
            parent = parent[step]
        action = draw(st.sampled_from(["replace", "delete", "insert"]))
        if action == "replace":
            parent[path[-1]] = draw(kubeish)
        elif action == "delete":
            del parent[path[-1]]
        elif isinstance(parent, dict):
            parent[draw(spec_keys)] = draw(kubeish)
        else:
            parent.insert(path[-1], draw(kubeish))
    return obj


def reviews(webhook: Webhook) -> st.SearchStrategy[Any]:
    kinds = sorted(webhook.kinds)
    kind = st.sampled_from(kinds)
    request = kind.flatmap(
        lambda k: st.fixed_dictionaries(
            {
                "uid": st.text(min_size=1, max_size=10),
                "kind": st.fixed_dictionaries(
                    {
                        "group": st.just("kubevirt.io"),
                        "version": st.sampled_from(["v1", "v1alpha3"]),
                        "kind": st.just(k) | st.sampled_from([*kinds, "Pod", ""]),
                    }
                ),
                "resource": st.fixed_dictionaries({"resource": st.text(max_size=10)}),
                "operation": st.sampled_from(["CREATE", "UPDATE", "DELETE", "CONNECT", "X"]),
                "namespace": st.sampled_from(["default", "kubevirt", ""]),
                "object": edited(k)
                | st.dictionaries(
                    st.sampled_from(["spec", "metadata", "status", "kind"]), kubeish, max_size=4
                ),
            },
            optional={
                "oldObject": edited(k) | kubeish,
                "userInfo": json_values
                | st.fixed_dictionaries(
                    {"username": st.sampled_from(["alice", "system:serviceaccount:kubevirt:x"])}
                ),
                "dryRun": json_values,
                "subResource": st.sampled_from(["status", "", "scale"]),
            },
        )
    )
    envelope = st.fixed_dictionaries(
        {
            "apiVersion": st.just("admission.k8s.io/v1"),
            "kind": st.just("AdmissionReview"),
            "request": request,
        }
    )
    return envelope | json_values


def verdict(status: int, body: Any, sent: Any) -> str:
    """'ok', '5xx' or 'invalid: why' for one answer."""
    if status >= 500:
        return "5xx"
    if status == 400:
        return "ok"  # not an AdmissionReview at all: the API server never sends one
    if status != 200:
        return f"invalid: status {status}"
    try:
        assert body["apiVersion"] == "admission.k8s.io/v1"
        assert body["kind"] == "AdmissionReview"
        response = body["response"]
        assert isinstance(response["allowed"], bool)
        assert response["uid"] == sent["request"]["uid"]
        if not response["allowed"]:
            assert response["status"]["message"]
            if response["status"]["code"] >= 500:
                return f"5xx: {response['status']['message']}"
        if "patch" in response:
            assert response["patchType"] == "JSONPatch"
    except (AssertionError, KeyError, TypeError) as error:
        return f"invalid: {error!r}"
    return "ok"


@pytest.fixture(scope="module")
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


@pytest.mark.parametrize("webhook", WEBHOOKS, ids=[w.name for w in WEBHOOKS])
def test_every_answer_is_a_valid_admission_review(
    webhook: Webhook,
    loop: asyncio.AbstractEventLoop,
    new_fake_api: Any,
    admission: Any,
    no_handler: Any,
) -> None:
    tally: Counter[str] = Counter()
    bad: list[tuple[str, Any]] = []

    async def start() -> tuple[Any, TestClient[Any, Any]]:
        api = new_fake_api()
        running = api.running()
        await running.__aenter__()
        app = build_app(admission(), SubresourceContext(api, FrontProxyConfig(), no_handler))
        client: TestClient[Any, Any] = TestClient(TestServer(app))
        await client.start_server()
        return running, client

    running, client = loop.run_until_complete(start())

    async def post(review: Any) -> tuple[int, Any]:
        response = await client.post(
            webhook.path, data=json.dumps(review), headers={"Content-Type": "application/json"}
        )
        try:
            return response.status, await response.json()
        except (ValueError, TypeError):
            return response.status, await response.text()

    @settings(
        max_examples=REVIEWS_PER_WEBHOOK,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(review=reviews(webhook))
    def fuzz(review: Any) -> None:
        status, body = loop.run_until_complete(post(review))
        result = verdict(status, body, review)
        tally[result.split(":")[0]] += 1
        if result != "ok" and len(bad) < 5:
            bad.append((result, review))

    try:
        fuzz()
    finally:
        loop.run_until_complete(client.close())
        loop.run_until_complete(running.__aexit__(None, None, None))
    total = sum(tally.values())
    print(
        f"\n{webhook.name}: {total} reviews, {tally['5xx']} 5xx, {tally['invalid']} invalid",
        flush=True,
    )
    assert total >= REVIEWS_PER_WEBHOOK * 0.9, f"only {total} reviews were generated"
    assert not bad, bad
