"""The name scheme: the same pod interface, tap and bridge names upstream gives."""

from __future__ import annotations

from kubevirt_api.models import MultusNetwork, Network, PodNetwork
from virt_domain.namescheme import (
    PodLinks,
    hashed_pod_interface_name,
    pod_interface_names,
    pod_links,
)

POD = Network(name="default", pod=PodNetwork())


def multus(name: str, network_name: str = "nad", *, default: bool | None = None) -> Network:
    return Network(name=name, multus=MultusNetwork(network_name=network_name, default=default))


def test_hashed_names_are_upstreams() -> None:
    # Upstream's own test vectors (pkg/network/multus, pkg/network/namescheme).
    assert hashed_pod_interface_name("blue") == "pod16477688c0e"
    assert hashed_pod_interface_name("red") == "podb1f51a511f1"
    assert hashed_pod_interface_name("network1") == "poda7662f44d65"


def test_primary_is_eth0_and_secondaries_are_hashed() -> None:
    assert pod_interface_names([POD, multus("blue"), multus("red")]) == {
        "default": "eth0",
        "blue": "pod16477688c0e",
        "red": "podb1f51a511f1",
    }


def test_the_multus_default_network_is_the_pods_eth0() -> None:
    names = pod_interface_names([multus("blue"), multus("main", default=True)])
    assert names == {"blue": "pod16477688c0e", "main": "eth0"}


def test_links_of_primary_and_secondary_networks() -> None:
    links = pod_links([POD, multus("blue")])
    assert links["default"] == PodLinks("eth0", "tap0", "k6t-eth0", "eth0-nic")
    assert links["blue"] == PodLinks(
        "pod16477688c0e", "tap16477688c0e", "k6t-16477688c0e", "16477688c0e-nic"
    )
    assert all(len(name) <= 15 for link in links.values() for name in vars_of(link))


def vars_of(link: PodLinks) -> tuple[str, ...]:
    return (link.pod_interface, link.tap, link.bridge, link.nic)
