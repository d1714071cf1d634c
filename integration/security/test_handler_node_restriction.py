"""virt-handler's service account reads no Secrets and changes only its own node.

Upstream's CVE-2023-26484: with the handler's token, a compromised node could mark every
other node unschedulable and wait for privileged pods to land on it. RBAC grants `patch`
on all nodes; virt_operator/components/virt-handler/rbac.yaml's ValidatingAdmissionPolicy narrows it to
the node the token is bound to (through its pod, as the kubelet's projected token is),
and to kubevirt.io labels and annotations there.
"""

from __future__ import annotations

import json
from typing import Any

import pytest


def test_the_handler_heartbeats_its_own_node_and_cannot_touch_another(
    handler: Any, kube: Any
) -> None:
    refusal = handler.wait_for_the_restriction()
    assert "this user cannot modify this node" in refusal, refusal

    cordon = handler.patch_node(handler.other, {"spec": {"unschedulable": True}})
    assert cordon.returncode != 0
    assert "Forbidden" in cordon.stderr, cordon.stderr
    assert not kube.kubectl.json("get", "node", handler.other)["spec"].get("unschedulable")

    own = handler.patch_node(handler.own, handler.heartbeat)
    assert own.returncode == 0, own.stderr
    labels = kube.kubectl.json("get", "node", handler.own)["metadata"]["labels"]
    assert labels["kubevirt.io/schedulable"] == "false"


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ({"spec": {"unschedulable": True}}, "this user cannot modify spec of node"),
        (
            {"metadata": {"labels": {"example.com/zone": "b"}}},
            "this user cannot update non kubevirt-owned labels",
        ),
        (
            {"metadata": {"labels": {"node-role.kubernetes.io/control-plane": ""}}},
            "this user cannot add/delete non kubevirt-owned labels",
        ),
        (
            {"metadata": {"annotations": {"example.com/x": "y"}}},
            "this user cannot add/delete non kubevirt-owned annotations",
        ),
    ],
    ids=["spec", "update-label", "add-label", "add-annotation"],
)
def test_on_its_own_node_the_handler_changes_only_kubevirt_metadata(
    handler: Any, patch: Any, message: str
) -> None:
    handler.wait_for_the_restriction()
    answer = handler.patch_node(handler.own, patch)
    assert answer.returncode != 0, f"{json.dumps(patch)} was accepted"
    assert message in answer.stderr, answer.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("get", "secrets", "--all-namespaces"),
        ("get", "secrets", "-n", "kubevirt"),
        ("get", "secret", "x", "-n", "default"),
    ],
    ids=["all", "kubevirt", "one"],
)
def test_the_handler_reads_no_secrets(handler: Any, args: tuple[str, ...]) -> None:
    answer = handler.kubectl.run(*args, check=False)
    assert answer.returncode != 0
    assert 'cannot get resource "secrets"' in answer.stderr or (
        'cannot list resource "secrets"' in answer.stderr
    ), answer.stderr
