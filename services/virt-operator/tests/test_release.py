"""manifests/release: generated from the same source, fresh, parameterised."""

from __future__ import annotations

from pathlib import Path

import yaml
from virt_operator import release

RELEASE = Path(__file__).resolve().parents[3] / "manifests" / "release"


def test_committed_release_manifests_are_fresh() -> None:
    assert release.main(["--check", "--output", str(RELEASE)]) == 0


def test_a_stale_file_is_reported(tmp_path: Path) -> None:
    release.main(["--output", str(tmp_path)])
    (tmp_path / "kubevirt-cr.yaml").write_text("# edited\n")
    assert release.main(["--check", "--output", str(tmp_path)]) == 1


def test_registry_and_tag_are_parameters(tmp_path: Path) -> None:
    release.main(["--registry", "reg.example:5000/kv", "--tag", "v7", "--output", str(tmp_path)])
    docs = list(yaml.safe_load_all((tmp_path / "kubevirt-operator.yaml").read_text()))
    kinds = [d["kind"] for d in docs]
    assert kinds == [
        "Namespace",
        "CustomResourceDefinition",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Deployment",
    ]
    assert docs[1]["metadata"]["name"] == "kubevirts.kubevirt.io"
    (container,) = docs[-1]["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "reg.example:5000/kv/virt-operator:v7"
    assert {"name": "OPERATOR_IMAGE", "value": container["image"]} in container["env"]
    assert docs[-1]["spec"]["replicas"] == 2
    (cr,) = yaml.safe_load_all((tmp_path / "kubevirt-cr.yaml").read_text())
    assert (cr["kind"], cr["metadata"]["namespace"], cr["metadata"]["name"]) == (
        "KubeVirt",
        "kubevirt",
        "kubevirt",
    )


def test_nothing_in_the_operator_manifest_is_labelled_as_installed_by_the_operator() -> None:
    # The operator removes what carries its label on uninstall: never itself.
    for doc in release.operator_objects():
        labels = doc["metadata"].get("labels") or {}
        assert labels.get("app.kubernetes.io/managed-by") != "virt-operator"
