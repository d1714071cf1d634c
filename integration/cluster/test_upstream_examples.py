"""Every upstream KubeVirt example of a kind we define passes the apiserver's schema."""

from __future__ import annotations

import json
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


def _defined() -> dict[tuple[str, str], bool]:
    """(group, kind) -> namespaced, for every CRD in manifests/crds (read from disk)."""
    kinds: dict[tuple[str, str], bool] = {}
    for path in crd_files(crds_dir(start=REPO)):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                spec = doc["spec"]
                kinds[(spec["group"], spec["names"]["kind"])] = spec["scope"] == "Namespaced"
    return kinds


def _group_kind(doc: dict[str, Any]) -> tuple[str, str]:
    return doc["apiVersion"].rsplit("/", 1)[0], doc["kind"]


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]


DEFINED = _defined()
OURS = sorted(
    p.name for p in EXAMPLES.glob("*.yaml") if any(_group_kind(d) in DEFINED for d in _docs(p))
)


@pytest.mark.parametrize("example", OURS)
def test_example_passes_server_side_validation(
    kube: Any, kubectl: Kubectl, namespace: str, example: str
) -> None:
    kube.require_crds()
    objects = []
    for doc in _docs(EXAMPLES / example):
        if _group_kind(doc) not in DEFINED:
            continue
        doc["metadata"].pop("namespace", None)
        objects.append(doc)
    out = kubectl.run(
        "create",
        "-n",
        namespace,
        "--dry-run=server",
        "--validate=strict",
        "-f",
        "-",
        stdin="\n---\n".join(json.dumps(o) for o in objects),
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("created (server dry run)") == len(objects)


def test_every_kubevirt_kind_in_the_corpus_has_a_crd(kube: Any) -> None:
    kube.require_crds()
    corpus = {
        _group_kind(d)
        for p in EXAMPLES.glob("*.yaml")
        for d in _docs(p)
        if _group_kind(d)[0] not in FOREIGN_GROUPS
    }
    assert corpus - set(DEFINED) == set()
