"""Every upstream KubeVirt example of a kind we define passes the apiserver's schema.

The examples go through the API as a user's `create` would, with dryRun=All and strict
field validation. The apiserver checks the CRD's structural schema before it calls
validating webhooks, so an example refused by a *validating* webhook (virt-api's rules,
e.g. a feature gate the cluster does not enable) has passed the schema; any other
refusal fails the test.
"""

from __future__ import annotations

import urllib.parse
from pathlib import Path
from typing import Any

import pytest
import yaml
from kv_cluster import Kubectl
from kv_cluster.crds import crd_files, crds_dir

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "compat" / "upstream-kubevirt" / "examples"
# Kinds in the corpus that belong to Kubernetes itself, not to KubeVirt.
FOREIGN_GROUPS = {"scheduling.k8s.io", "resource.k8s.io"}


def _defined() -> dict[tuple[str, str], tuple[str, bool]]:
    """(group, kind) -> (plural, namespaced) for every CRD in manifests/crds (from disk)."""
    kinds: dict[tuple[str, str], tuple[str, bool]] = {}
    for path in crd_files(crds_dir(start=REPO)):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                spec = doc["spec"]
                kinds[(spec["group"], spec["names"]["kind"])] = (
                    spec["names"]["plural"],
                    spec["scope"] == "Namespaced",
                )
    return kinds


def _group_kind(doc: dict[str, Any]) -> tuple[str, str]:
    return doc["apiVersion"].rsplit("/", 1)[0], doc["kind"]


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]


def _validating_webhooks(kubectl: Kubectl) -> set[str]:
    configs = kubectl.json("get", "validatingwebhookconfigurations")["items"]
    return {hook["name"] for config in configs for hook in config.get("webhooks") or []}


DEFINED = _defined()
OURS = sorted(
    p.name for p in EXAMPLES.glob("*.yaml") if any(_group_kind(d) in DEFINED for d in _docs(p))
)


@pytest.mark.parametrize("example", OURS)
def test_example_passes_schema_validation(
    kube: Any, kubectl: Kubectl, namespace: str, example: str
) -> None:
    kube.require_crds()
    api = kube.api()
    query = urllib.parse.urlencode({"dryRun": "All", "fieldValidation": "Strict"})
    checked = 0
    for doc in _docs(EXAMPLES / example):
        if _group_kind(doc) not in DEFINED:
            continue
        plural, namespaced = DEFINED[_group_kind(doc)]
        doc["metadata"].pop("namespace", None)
        if namespaced:
            path = f"/apis/{doc['apiVersion']}/namespaces/{namespace}/{plural}?{query}"
        else:  # cluster-scoped: a name of its own, so an existing object cannot collide
            doc["metadata"]["name"] = f"{doc['metadata']['name']}-{namespace}"
            path = f"/apis/{doc['apiVersion']}/{plural}?{query}"
        answer = api.request("POST", path, doc)
        checked += 1
        if answer.status in (200, 201):
            continue
        message = (answer.body or {}).get("message", "")
        webhook = message.split('"')[1] if message.startswith("admission webhook ") else None
        assert webhook in _validating_webhooks(kubectl), (
            f"{example}: {doc['kind']} refused ({answer.status}): {message}"
        )
    assert checked > 0


def test_every_kubevirt_kind_in_the_corpus_has_a_crd(kube: Any) -> None:
    kube.require_crds()
    corpus = {
        _group_kind(d)
        for p in EXAMPLES.glob("*.yaml")
        for d in _docs(p)
        if _group_kind(d)[0] not in FOREIGN_GROUPS
    }
    assert corpus - set(DEFINED) == set()
