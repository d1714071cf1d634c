"""`kv-cluster up` installs the common instancetypes and preferences, idempotently, and
takes its own away when the KubeVirt CR opts out (a user's own stay)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from kubevirt_api.common_instancetypes import cluster_instancetypes, cluster_preferences
from kv_cluster import Kubectl
from kv_cluster.common_instancetypes import CommonInstancetypes

INSTANCETYPES = "virtualmachineclusterinstancetypes.instancetype.kubevirt.io"
PREFERENCES = "virtualmachineclusterpreferences.instancetype.kubevirt.io"


def _names(kubectl: Kubectl, resource: str) -> set[str]:
    out = kubectl.run("get", resource, "-o", "name").stdout.split()
    return {line.rpartition("/")[2] for line in out}


def _opt(kubectl: Kubectl, enabled: bool) -> None:
    patch = {"spec": {"configuration": {"commonInstancetypesDeployment": {"enabled": enabled}}}}
    kubectl.run(
        "patch", "kubevirt", "kubevirt", "-n", "kubevirt", "--type=merge", "-p", json.dumps(patch)
    )


@pytest.fixture
def installed(kube: Any, kubectl: Kubectl) -> Iterator[None]:
    """The cluster as `up` left it (instancetypes installed), restored after the test."""
    kube.require_local()  # `up` of this cluster ran the step; another cluster's need not
    yield
    _opt(kubectl, True)
    CommonInstancetypes(kubectl, after_kubevirt_cr=True).ensure()


def test_kubectl_lists_every_common_instancetype_and_preference(
    installed: None, kubectl: Kubectl
) -> None:
    want_types = {o["metadata"]["name"] for o in cluster_instancetypes()}
    want_prefs = {o["metadata"]["name"] for o in cluster_preferences()}
    assert want_types <= _names(kubectl, INSTANCETYPES)
    assert want_prefs <= _names(kubectl, PREFERENCES)
    table = kubectl.run("get", "virtualmachineclusterinstancetypes").stdout
    assert "u1.small" in table
    small = kubectl.json("get", INSTANCETYPES, "u1.small")
    assert small["spec"] == {"cpu": {"guest": 1}, "memory": {"guest": "2Gi"}}
    assert small["metadata"]["labels"]["instancetype.kubevirt.io/class"] == "general.purpose"


def test_a_second_run_writes_nothing(installed: None, kubectl: Kubectl) -> None:
    before = kubectl.json("get", PREFERENCES, "fedora")["metadata"]["resourceVersion"]
    CommonInstancetypes(kubectl, after_kubevirt_cr=True).ensure()
    after = kubectl.json("get", PREFERENCES, "fedora")["metadata"]["resourceVersion"]
    assert after == before


def test_opting_out_removes_ours_and_keeps_the_users(installed: None, kubectl: Kubectl) -> None:
    own = {
        "apiVersion": "instancetype.kubevirt.io/v1beta1",
        "kind": "VirtualMachineClusterInstancetype",
        "metadata": {"name": "kvt-users-own"},
        "spec": {"cpu": {"guest": 1}, "memory": {"guest": "1Gi"}},
    }
    kubectl.run("apply", "--server-side", "--field-manager=kvt", "-f", "-", stdin=json.dumps(own))
    try:
        _opt(kubectl, False)
        action = CommonInstancetypes(kubectl, after_kubevirt_cr=True).ensure()
        assert action.startswith("opted out")
        assert _names(kubectl, INSTANCETYPES) == {"kvt-users-own"}
        assert not {o["metadata"]["name"] for o in cluster_preferences()} & _names(
            kubectl, PREFERENCES
        )
        _opt(kubectl, True)
        CommonInstancetypes(kubectl, after_kubevirt_cr=True).ensure()
        assert "u1.small" in _names(kubectl, INSTANCETYPES)
    finally:
        kubectl.run("delete", INSTANCETYPES, "kvt-users-own", "--ignore-not-found")
