"""Multus: the launcher pod's annotations as upstream renders them, and a clear failure
(not a pod stuck in ContainerCreating) when Multus or a NetworkAttachmentDefinition is
missing."""

from __future__ import annotations

import json
from typing import Any, cast

import pytest
from kube_runtime import ApiError, KubeClient
from kubevirt_api import VirtualMachineInstance, load
from virt_controller.config import ControllerConfig
from virt_controller.launcher_pod import render_launcher_pod
from virt_controller.multus import (
    DEFAULT_NETWORK_ANNOTATION,
    NETWORKS_ANNOTATION,
    missing_attachment,
    network_annotations,
)


def vmi(interfaces: list[dict[str, Any]], networks: list[dict[str, Any]]) -> VirtualMachineInstance:
    return load(
        VirtualMachineInstance,
        {
            "apiVersion": "kubevirt.io/v1",
            "kind": "VirtualMachineInstance",
            "metadata": {"name": "vm-a", "namespace": "ns", "uid": "uid-1"},
            "spec": {
                "domain": {
                    "devices": {"interfaces": interfaces},
                    "resources": {"requests": {"memory": "1Gi"}},
                },
                "networks": networks,
            },
        },
    )


POD_AND_TWO = vmi(
    [
        {"name": "default", "masquerade": {}},
        {"name": "blue", "bridge": {}, "macAddress": "02:00:00:00:00:0b"},
        {"name": "red", "bridge": {}},
    ],
    [
        {"name": "default", "pod": {}},
        {"name": "blue", "multus": {"networkName": "test1"}},
        {"name": "red", "multus": {"networkName": "other-namespace/test1"}},
    ],
)


def test_the_networks_annotation_is_upstreams_json() -> None:
    pod = render_launcher_pod(POD_AND_TWO, ControllerConfig())
    annotations = pod["metadata"]["annotations"]
    # Byte for byte what upstream's json.Marshal of NetworkSelectionElements gives.
    assert annotations[NETWORKS_ANNOTATION] == (
        '[{"name":"test1","namespace":"ns","mac":"02:00:00:00:00:0b","interface":"pod16477688c0e"},'
        '{"name":"test1","namespace":"other-namespace","interface":"podb1f51a511f1"}]'
    )
    assert DEFAULT_NETWORK_ANNOTATION not in annotations


def test_no_multus_annotation_without_multus_networks() -> None:
    pod = render_launcher_pod(
        vmi([{"name": "default", "masquerade": {}}], [{"name": "default", "pod": {}}]),
        ControllerConfig(),
    )
    assert NETWORKS_ANNOTATION not in pod["metadata"]["annotations"]


def test_the_default_multus_network_replaces_the_cluster_network() -> None:
    annotations = network_annotations(
        vmi(
            [{"name": "main", "bridge": {}}, {"name": "blue", "bridge": {}}],
            [
                {"name": "main", "multus": {"networkName": "infra/main-net", "default": True}},
                {"name": "blue", "multus": {"networkName": "test1"}},
            ],
        )
    )
    assert annotations[DEFAULT_NETWORK_ANNOTATION] == "infra/main-net"
    assert json.loads(annotations[NETWORKS_ANNOTATION]) == [
        {"name": "test1", "namespace": "ns", "interface": "pod16477688c0e"}
    ]


def test_absent_interfaces_are_not_attached() -> None:
    annotations = network_annotations(
        vmi(
            [
                {"name": "default", "masquerade": {}},
                {"name": "blue", "bridge": {}, "state": "absent"},
            ],
            [{"name": "default", "pod": {}}, {"name": "blue", "multus": {"networkName": "test1"}}],
        )
    )
    assert annotations == {}


class NadClient:
    """Answers GETs of NADs from `nads` and discovery of k8s.cni.cncf.io by `installed`."""

    def __init__(self, nads: set[str], *, installed: bool = True, status: int = 404) -> None:
        self.nads = nads
        self.installed = installed
        self.status = status
        self.paths: list[str] = []

    async def get(self, resource: Any, name: str, namespace: str | None = None) -> Any:
        path = resource.path(namespace, name)
        self.paths.append(path)
        if not self.installed:
            raise ApiError(404, "", "404 page not found")
        if f"{namespace}/{name}" not in self.nads:
            raise ApiError(self.status, "NotFound" if self.status == 404 else "Forbidden", "no")
        return {"metadata": {"name": name, "namespace": namespace}}

    async def request(self, method: str, path: str, **kw: Any) -> Any:
        self.paths.append(path)
        if not self.installed:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return {"kind": "APIResourceList"}


async def test_every_nad_present_is_no_problem() -> None:
    client = NadClient({"ns/test1", "other-namespace/test1"})
    assert await missing_attachment(cast(KubeClient, client), POD_AND_TWO) is None
    assert client.paths == [
        "/apis/k8s.cni.cncf.io/v1/namespaces/ns/network-attachment-definitions/test1",
        "/apis/k8s.cni.cncf.io/v1/namespaces/other-namespace/network-attachment-definitions/test1",
    ]


async def test_a_cluster_without_multus_is_named() -> None:
    client = NadClient(set(), installed=False)
    message = await missing_attachment(cast(KubeClient, client), POD_AND_TWO)
    assert message == (
        "Multus (k8s.cni.cncf.io NetworkAttachmentDefinition) is not installed in this "
        "cluster: network 'blue' (spec.networks[1].multus.networkName) cannot be attached"
    )


async def test_a_missing_nad_is_named_with_its_namespace() -> None:
    client = NadClient({"ns/test1"})
    message = await missing_attachment(cast(KubeClient, client), POD_AND_TWO)
    assert message is not None
    assert message.startswith(
        "failed to locate network attachment definition other-namespace/test1: network 'red' "
        "(spec.networks[2].multus.networkName)"
    )


async def test_a_forbidden_nad_says_so() -> None:
    client = NadClient(set(), status=403)
    message = await missing_attachment(cast(KubeClient, client), POD_AND_TWO)
    assert message is not None
    assert message.startswith("virt-controller may not read NetworkAttachmentDefinition ns/test1")


async def test_other_api_errors_are_raised_for_a_retry() -> None:
    client = NadClient(set(), status=500)
    with pytest.raises(ApiError):
        await missing_attachment(cast(KubeClient, client), POD_AND_TWO)
