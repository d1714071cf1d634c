"""The objectgraph subresource: upstream's nodes, labels and options, behind its gate."""

from __future__ import annotations

from typing import Any

import pytest
from virt_api.objectgraph import filter_graph, vm_graph

NS = "ns1"
VM_PATH = f"/apis/kubevirt.io/v1/namespaces/{NS}/virtualmachines/vm1"
VMI_PATH = f"/apis/kubevirt.io/v1/namespaces/{NS}/virtualmachineinstances/vm1"
PODS_PATH = f"/api/v1/namespaces/{NS}/pods"


@pytest.fixture
def subresource_gates() -> frozenset[str]:
    return frozenset({"ObjectGraph"})


def _vm() -> dict[str, Any]:
    return {
        "metadata": {"name": "vm1", "namespace": NS},
        "spec": {
            "instancetype": {"name": "u1.small"},
            "template": {
                "spec": {
                    "accessCredentials": [
                        {"sshPublicKey": {"source": {"secret": {"secretName": "keys"}}}}
                    ],
                    "networks": [{"name": "n", "multus": {"networkName": "other/nad1"}}],
                    "volumes": [
                        {"name": "d", "persistentVolumeClaim": {"claimName": "pvc1"}},
                        {"name": "c", "cloudInitNoCloud": {"userDataSecretRef": {"name": "ud"}}},
                    ],
                }
            },
        },
        "status": {
            "created": True,
            "instancetypeRef": {"controllerRevisionRef": {"name": "vm1-u1.small-rev"}},
        },
    }


def _ref(node: dict[str, Any]) -> tuple[str, str, str]:
    ref = node["objectReference"]
    return ref["kind"], ref["namespace"], ref["name"]


def test_vm_graph_names_what_upstream_names() -> None:
    graph = vm_graph(_vm(), "virt-launcher-vm1-x")
    assert _ref(graph) == ("VirtualMachine", NS, "vm1")
    children = graph["children"]
    assert [_ref(c) for c in children] == [
        ("VirtualMachineInstance", NS, "vm1"),
        ("VirtualMachineClusterInstancetype", "", "u1.small"),
        ("ControllerRevision", NS, "vm1-u1.small-rev"),
        ("Secret", NS, "keys"),
        ("PersistentVolumeClaim", NS, "pvc1"),
        ("Secret", NS, "ud"),
        ("NetworkAttachmentDefinition", "other", "nad1"),
    ]
    assert [_ref(c) for c in children[0]["children"]] == [("Pod", NS, "virt-launcher-vm1-x")]
    assert children[1]["optional"] is True
    assert children[4]["labels"] == {"kubevirt.io/dependency-type": "storage"}
    assert children[4]["objectReference"]["apiGroup"] == ""


def test_options_drop_optional_nodes_and_filter_by_label() -> None:
    graph = vm_graph(_vm(), None)
    without = filter_graph(graph, False, {})
    assert all(not c.get("optional") for c in without["children"])
    storage = filter_graph(graph, True, {"kubevirt.io/dependency-type": "storage"})
    assert [_ref(c) for c in storage["children"]] == [("PersistentVolumeClaim", NS, "pvc1")]


async def test_vmi_graph_through_the_api_with_its_launcher_pod(proxied: Any, fake_api: Any) -> None:
    fake_api.objects[VMI_PATH] = {
        "metadata": {"name": "vm1", "namespace": NS},
        "spec": {"volumes": [{"name": "s", "secret": {"secretName": "sec"}}]},
    }
    fake_api.objects[PODS_PATH] = {
        "items": [
            {"metadata": {"name": "other", "ownerReferences": []}},
            {
                "metadata": {
                    "name": "virt-launcher-vm1-abc",
                    "ownerReferences": [{"kind": "VirtualMachineInstance", "name": "vm1"}],
                }
            },
        ]
    }
    async with proxied.session.get(
        proxied.url("virtualmachineinstances", "vm1", "objectgraph"),
        json={"includeOptionalNodes": False},
    ) as response:
        assert response.status == 200
        graph = await response.json()
    assert [_ref(c) for c in graph["children"]] == [
        ("Pod", NS, "virt-launcher-vm1-abc"),
        ("Secret", NS, "sec"),
    ]


async def test_a_missing_vm_is_404_and_bad_options_400(proxied: Any, fake_api: Any) -> None:
    async with proxied.session.get(proxied.url("virtualmachines", "nope", "objectgraph")) as r:
        assert r.status == 404
    fake_api.objects[VM_PATH] = _vm()
    async with proxied.session.get(
        proxied.url("virtualmachines", "vm1", "objectgraph"), json={"includeOptionalNodes": "no"}
    ) as r:
        assert r.status == 400
        assert "includeOptionalNodes must be a boolean" in (await r.json())["message"]


class TestWithoutTheGate:
    @pytest.fixture
    def subresource_gates(self) -> frozenset[str]:
        return frozenset()

    async def test_refused_as_upstream_refuses(self, proxied: Any, fake_api: Any) -> None:
        fake_api.objects[VM_PATH] = _vm()
        async with proxied.session.get(proxied.url("virtualmachines", "vm1", "objectgraph")) as r:
            assert r.status == 400
            assert (await r.json())["message"] == (
                "ObjectGraph feature gate not enabled: Unable to return object graph."
            )
