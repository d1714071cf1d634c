"""schemathesis against virt-api's own OpenAPI document (virt_api.openapi, served at
/openapi/v2), the way users reach it: through the kube-apiserver's aggregated API
`/apis/subresources.kubevirt.io/v1/...`, on a node-less control plane of its own with virt-api
in host mode.

Every operation gets SCHEMA_FUZZ_EXAMPLES generated requests (positive and negative, a
fixed seed), their path parameters either what hypothesis made up or the namespace, VM and
VMI created first (so calls reach the handlers' checks, not only the 404s). Each answer must
be no 5xx (no node runs a VMI here, so nothing legitimately fails upstream of virt-api), a
status the document lists, a body the document's schema accepts, and, for an error, a
Kubernetes Status with a message."""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterator
from typing import Any

import hypothesis
import pytest
import requests
import schemathesis
from hypothesis import strategies as st
from kv_cluster.slots import private_env
from schemathesis.checks import not_a_server_error
from schemathesis.config import SchemathesisConfig
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from virt_api.openapi import openapi_document

__all__: list[str] = []

PRIVATE_ENV = private_env("schema-fuzz", kube_proxy=False)
PRIVATE_VIRT_API = True
EXAMPLES = int(os.environ.get("SCHEMA_FUZZ_EXAMPLES", "20"))
NAMESPACE = "schema-fuzz"
NAME = "fuzz"
NOWHERE = {"kvt.kubevirt-py.io/nowhere": "true"}
# The status codes answered, over the whole module (printed at its end: `pytest -s`).
ANSWERS: Counter[int] = Counter()

schema = schemathesis.openapi.from_dict(
    openapi_document(),
    config=SchemathesisConfig.from_dict(
        {"generation": {"mode": "all", "max-examples": EXAMPLES, "deterministic": True}}
    ),
)


@schema.hook
def flatmap_path_parameters(
    context: Any, path_parameters: dict[str, Any] | None
) -> st.SearchStrategy[dict[str, Any] | None]:
    """Half the calls name the objects that exist, the rest what was generated."""
    if not path_parameters:
        return st.just(path_parameters)
    real = {**path_parameters}
    if "namespace" in real:
        real["namespace"] = NAMESPACE
    if "name" in real:
        real["name"] = NAME
    return st.sampled_from([path_parameters, real])


@pytest.fixture(scope="module")
def kube(private_control_plane: Any) -> Any:
    """This module's own control plane (it shadows the session's `kube`)."""
    return private_control_plane


@pytest.fixture(scope="module")
def objects(kube: Any) -> None:
    """The namespace, a stopped VM and a VMI no node ever runs, all named NAME."""
    domain = {"devices": {}, "resources": {"requests": {"memory": "64Mi"}}}
    documents = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {
            "apiVersion": "kubevirt.io/v1",
            "kind": "VirtualMachine",
            "metadata": {"name": NAME, "namespace": NAMESPACE},
            "spec": {
                "runStrategy": "Halted",
                "template": {"spec": {"domain": domain, "nodeSelector": NOWHERE}},
            },
        },
        {
            "apiVersion": "kubevirt.io/v1",
            "kind": "VirtualMachineInstance",
            "metadata": {"name": NAME, "namespace": NAMESPACE},
            "spec": {"domain": domain, "nodeSelector": NOWHERE},
        },
    ]
    for document in documents:
        kube.kubectl.run("apply", "-f", "-", stdin=json.dumps(document))


@pytest.fixture(scope="module")
def session(kube: Any, objects: None) -> Iterator[tuple[str, requests.Session]]:
    api = kube.api()
    with api.session() as http:
        yield api.base_url, http
    print(f"schema fuzz: {ANSWERS.total()} requests, by status {dict(sorted(ANSWERS.items()))}")


def _status_body(ctx: Any, response: Any, case: Any) -> bool | None:
    """An error answer is a metav1.Status naming its code, with a message."""
    if response.status_code < 400:
        return None
    try:
        body = json.loads(response.content)
    except ValueError as error:
        raise AssertionError(
            f"{response.status_code} with a body that is not JSON: {response.content[:200]!r}"
        ) from error
    assert isinstance(body, dict), body
    assert body.get("kind") == "Status", body
    assert body.get("code") == response.status_code, body
    assert body.get("message"), body
    return True


CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    _status_body,
]


@schema.parametrize()
@hypothesis.settings(
    max_examples=EXAMPLES,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=list(hypothesis.HealthCheck),
)
def test_virt_api_answers_its_own_document(
    case: schemathesis.Case, session: tuple[str, requests.Session]
) -> None:
    base_url, http = session
    response = case.call(base_url=base_url, session=http, timeout=30)
    ANSWERS[response.status_code] += 1
    case.validate_response(response, checks=CHECKS)
