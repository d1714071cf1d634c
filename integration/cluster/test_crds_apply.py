"""The generated CRDs install on a real apiserver, with structural schemas, idempotently."""

from __future__ import annotations

from typing import Any

from kv_cluster import Kubectl
from kv_cluster.crds import crd_files, crds_dir, install_crds


def test_every_crd_is_established_with_a_structural_schema(kube: Any, kubectl: Kubectl) -> None:
    crds = kube.require_crds()
    for crd in crds:
        name = crd["metadata"]["name"]
        live = kubectl.json("get", "crd", name)
        conditions = {c["type"]: c for c in live["status"]["conditions"]}
        assert conditions["Established"]["status"] == "True", name
        assert conditions["NamesAccepted"]["status"] == "True", name
        assert "NonStructuralSchema" not in conditions, conditions["NonStructuralSchema"]["message"]


def test_applying_again_changes_nothing(kube: Any, kubectl: Kubectl) -> None:
    crds = kube.require_crds()
    names = [crd["metadata"]["name"] for crd in crds]
    before = {n: kubectl.json("get", "crd", n)["metadata"]["generation"] for n in names}
    install_crds(kubectl, crd_files(crds_dir()))
    after = {n: kubectl.json("get", "crd", n)["metadata"]["generation"] for n in names}
    assert after == before
