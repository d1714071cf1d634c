"""CRDs are found in the repository's manifests/crds, or where KV_CLUSTER_CRDS_DIR says."""

from pathlib import Path

import pytest
from kv_cluster.config import ConfigError
from kv_cluster.crds import crd_files, crds_dir


def test_found_from_a_subdirectory_of_the_repository(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "manifests" / "crds").mkdir(parents=True)
    (tmp_path / "deep" / "er").mkdir(parents=True)
    assert crds_dir({}, start=tmp_path / "deep" / "er") == tmp_path / "manifests" / "crds"


def test_the_environment_wins(tmp_path: Path) -> None:
    assert crds_dir({"KV_CLUSTER_CRDS_DIR": str(tmp_path)}) == tmp_path


def test_only_yaml_files_are_applied_and_absence_is_no_error(tmp_path: Path) -> None:
    assert crd_files(None) == []
    assert crd_files(tmp_path / "missing") == []
    for name in ("b.yaml", "a.yml", "README.md", "kustomization.yaml"):
        (tmp_path / name).write_text("")
    assert [p.name for p in crd_files(tmp_path)] == ["a.yml", "b.yaml"]


def test_a_crds_dir_with_dotdot_is_refused() -> None:
    with pytest.raises(ConfigError, match="KV_CLUSTER_CRDS_DIR"):
        crds_dir({"KV_CLUSTER_CRDS_DIR": "manifests/../../etc"})
