"""The private clusters' slots never share a port, an address or an address range."""

from __future__ import annotations

import itertools
from pathlib import Path

from kv_cluster.config import ClusterConfig
from kv_cluster.slots import SLOTS, private_env


def test_no_two_slots_share_a_port_an_address_or_a_range() -> None:
    for a, b in itertools.combinations(SLOTS.values(), 2):
        pair = f"{a.name} / {b.name}"
        assert not set(a.ports()) & set(b.ports()), pair
        assert a.host_ip != b.host_ip, pair
        assert a.prefix != b.prefix, pair
        for x, y in itertools.product(a.networks(), b.networks()):
            assert not x.overlaps(y), f"{pair}: {x} {y}"
    for slot in SLOTS.values():
        service, pods = slot.networks()
        assert not service.overlaps(pods), slot.name


def test_a_slot_reads_as_a_cluster_config_and_can_be_moved() -> None:
    env = private_env("security", kube_proxy=False, environ={"HOME": "/home/u"})
    config = ClusterConfig.from_env(env)
    assert config.state_dir == Path("/home/u/.local/state/kubevirt-py/security")
    assert config.ports.base == SLOTS["security"].port_base
    assert config.host_ip == SLOTS["security"].host_ip
    assert env["KV_CLUSTER_KUBE_PROXY"] == "0"
    moved = private_env(
        "security",
        environ={
            "XDG_STATE_HOME": "/x",
            "KV_SECURITY_PORT_BASE": "27400",
            "KV_SECURITY_HOST_IP": "10.95.0.25",
        },
    )
    assert moved["KV_CLUSTER_STATE_DIR"] == "/x/kubevirt-py/security"
    assert ClusterConfig.from_env(moved).ports.base == 27400
    assert moved["KV_CLUSTER_HOST_IP"] == "10.95.0.25"
    assert "KV_CLUSTER_KUBE_PROXY" not in moved
