"""containerd counts as serving only when its CRI plugin loaded (what the kubelet calls)."""

from __future__ import annotations

from kv_cluster.containerd import cri_plugin_status

LISTING = """\
TYPE                                  ID                       PLATFORMS      STATUS
io.containerd.snapshotter.v1          devmapper                linux/amd64    error
io.containerd.grpc.v1                 version                  -              ok
io.containerd.grpc.v1                 cri                      linux/amd64    {status}
"""


def test_a_loaded_cri_plugin_is_ok() -> None:
    assert cri_plugin_status(LISTING.format(status="ok")) == "ok"


def test_a_failed_cri_plugin_is_reported_and_another_plugins_error_is_not() -> None:
    assert cri_plugin_status(LISTING.format(status="error")) == "error"


def test_a_containerd_without_the_cri_plugin_has_no_status() -> None:
    assert cri_plugin_status(LISTING.split("io.containerd.grpc.v1                 cri")[0]) is None
