"""The Kubernetes build spec and its cache: staging replaces, ldflags, the completion marker."""

import json
from pathlib import Path

import pytest
from kv_cluster.gobuild import MARKER, BuildError, _staging_replaces, ensure_built, kubernetes_build

_GOMOD = """module k8s.io/kubernetes

require k8s.io/api v0.0.0

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/client-go => ./staging/src/k8s.io/client-go
\tgithub.com/other/thing => github.com/fork/thing v1.2.3
)
"""


def test_every_staging_module_is_found() -> None:
    assert _staging_replaces(_GOMOD) == ["k8s.io/api", "k8s.io/client-go"]


def test_the_kubernetes_build_stamps_its_version() -> None:
    spec = kubernetes_build("v1.37.2")
    assert spec.binaries == (
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
        "kubelet",
        "kube-proxy",
    )
    assert "-X k8s.io/component-base/version.gitVersion=v1.37.2" in spec.ldflags
    assert "-X k8s.io/component-base/version.gitMinor=37" in spec.ldflags
    assert spec.requires == (("k8s.io/kubernetes", "v1.37.2"),)


def test_a_malformed_version_is_refused() -> None:
    with pytest.raises(BuildError, match=r"v1\.37\.2"):
        kubernetes_build("1.37")


def test_a_complete_cache_is_used_without_building(tmp_path: Path) -> None:
    spec = kubernetes_build("v1.37.2")
    bin_dir = spec.bin_dir(tmp_path)
    bin_dir.mkdir(parents=True)
    for name in spec.binaries:
        (bin_dir / name).write_text("#!/bin/sh\n")
        (bin_dir / name).chmod(0o755)
    assert not spec.is_complete(tmp_path)  # binaries without the marker may be half a build
    (spec.root(tmp_path) / MARKER).write_text(json.dumps({"version": "v1.37.2"}))
    assert spec.is_complete(tmp_path)
    assert ensure_built(spec, tmp_path) == bin_dir
    assert not (spec.root(tmp_path) / "src").exists()
