"""Resource coordinates of KubeVirt's kinds come from the kind table, once."""

from __future__ import annotations

import pytest
from kubevirt_api import KINDS, Resource, resources


def test_kubevirt_kinds_at_their_storage_version() -> None:
    assert (
        Resource("kubevirt.io", "v1", "virtualmachines", "VirtualMachine")
        == resources.VIRTUAL_MACHINES
    )
    assert resources.VIRTUAL_MACHINE_INSTANCES.path("ns", "a") == (
        "/apis/kubevirt.io/v1/namespaces/ns/virtualmachineinstances/a"
    )
    assert resources.KUBEVIRTS.path() == "/apis/kubevirt.io/v1/kubevirts"
    assert (
        resources.VIRTUAL_MACHINE_INSTANCE_MIGRATIONS.plural == "virtualmachineinstancemigrations"
    )
    assert resources.VIRTUAL_MACHINE_INSTANCE_REPLICASETS.api_version == "kubevirt.io/v1"
    assert resources.VIRTUAL_MACHINE_INSTANCETYPES.path("ns", "small") == (
        "/apis/instancetype.kubevirt.io/v1beta1/namespaces/ns/virtualmachineinstancetypes/small"
    )
    assert resources.VIRTUAL_MACHINE_CLUSTER_INSTANCETYPES.path(name="small") == (
        "/apis/instancetype.kubevirt.io/v1beta1/virtualmachineclusterinstancetypes/small"
    )


def test_every_kind_has_coordinates() -> None:
    for info in KINDS:
        resource = resources.resource_of(info)
        assert (resource.group, resource.plural, resource.kind) == (
            info.group,
            info.plural,
            info.kind,
        )
        assert resource.api_version == info.api_version


def test_paths() -> None:
    pods = Resource("", "v1", "pods", "Pod")
    nodes = Resource("", "v1", "nodes", "Node", namespaced=False)
    assert pods.path() == "/api/v1/pods"
    assert pods.path("a b", "x/y", "log") == "/api/v1/namespaces/a%20b/pods/x%2Fy/log"
    assert nodes.path(name="n1") == "/api/v1/nodes/n1"
    with pytest.raises(ValueError, match="cluster-scoped"):
        nodes.path("ns")
    with pytest.raises(ValueError, match="subresource needs an object name"):
        pods.path("ns", subresource="log")
    with pytest.raises(ValueError, match="name must not be empty"):
        pods.path("ns", "")
