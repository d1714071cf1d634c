"""Taps and the bridge are made inside a network namespace, owned by the launcher's uid."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from kubevirt_api import VirtualMachineInstance, load
from virt_handler.network import PodInterface, pod_interfaces, setup_in_netns

needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("ip") is None, reason="needs root and iproute2"
)


@pytest.fixture
def netns() -> Iterator[str]:
    name = f"kvh-test-{secrets.token_hex(3)}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        yield name
    finally:
        subprocess.run(["ip", "netns", "delete", name], check=False)


def _links(netns: str) -> dict[str, dict]:
    out = subprocess.run(
        ["ip", "-n", netns, "-details", "-json", "link", "show"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {link["ifname"]: link for link in json.loads(out)}


@needs_root
def test_tap_and_bridge_are_created_once(netns: str) -> None:
    iface = PodInterface("default", "tap0", "k6t-eth0")
    created = setup_in_netns(f"/run/netns/{netns}", [iface])
    assert created == ["tap0", "k6t-eth0"]
    links = _links(netns)
    tap = links["tap0"]
    # iproute2 shows the owner by name when uid 107 has one on this host (qemu).
    assert tap["linkinfo"]["info_data"]["user"] in (107, "107", _user_name(107))
    assert tap.get("master") == "k6t-eth0"
    assert "UP" in links["k6t-eth0"]["flags"]
    addrs = subprocess.run(
        ["ip", "-n", netns, "-4", "-o", "addr", "show", "k6t-eth0"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "10.0.2.1/24" in addrs
    # Idempotent: a second pass (a restarted handler) creates nothing.
    assert setup_in_netns(f"/run/netns/{netns}", [iface]) == []


def test_the_default_pod_interface_gets_tap0_and_a_bridge() -> None:
    assert pod_interfaces(_vmi({"domain": {"devices": {}}})) == [
        PodInterface("default", "tap0", "k6t-eth0")
    ]
    assert pod_interfaces(_vmi({"domain": {"devices": {"autoattachPodInterface": False}}})) == []


def test_each_interface_gets_its_tap_and_only_pod_network_ones_a_bridge() -> None:
    spec = {
        "domain": {
            "devices": {
                "interfaces": [
                    {"name": "default", "masquerade": {}},
                    {"name": "storage", "bridge": {}},
                    {"name": "unlisted", "masquerade": {}},
                ]
            }
        },
        "networks": [
            {"name": "default", "pod": {}},
            {"name": "storage", "multus": {"networkName": "storage-net"}},
        ],
    }
    assert pod_interfaces(_vmi(spec)) == [
        PodInterface("default", "tap0", "k6t-eth0"),
        PodInterface("storage", "tap1", None),
        PodInterface("unlisted", "tap2", "k6t-eth2"),
    ]


def _vmi(spec: dict[str, Any]) -> VirtualMachineInstance:
    return load(VirtualMachineInstance, {"metadata": {"name": "vm"}, "spec": spec})


def _user_name(uid: int) -> str:
    import pwd

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)
