"""A host without the node's packages is told which ones and how to get them."""

from __future__ import annotations

import pytest
from kv_cluster import nodehost
from kv_cluster.nodehost import NodeHostError, check_node_host, missing_node_packages


def test_missing_programs_map_to_debian_packages() -> None:
    needed = {"/nonexistent/bin/containerd": "containerd", "sh": "dash", "kv-no-such": "runc"}
    assert missing_node_packages(needed) == ["containerd", "runc"]


def test_check_names_packages_and_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        nodehost,
        "_NEEDED",
        {"/nonexistent/usr/lib/cni/bridge": "containernetworking-plugins", "sh": "dash"},
    )
    with pytest.raises(NodeHostError) as raised:
        check_node_host()
    message = str(raised.value)
    assert "containernetworking-plugins" in message
    assert "apt-get install containernetworking-plugins" in message
    assert "make setup" in message
