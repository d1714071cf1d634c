"""virt-operator on a real control plane: install in upstream's order to Deployed, drift
put back within 30 s, BlockUninstallIfWorkloadsExist, uninstall of everything installed.

The tests run in order on one install (module-scoped operator). Pods are played Ready on
a fake node (no kubelet), so readiness is the Deployment and DaemonSet controllers' own.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

# The fixture's type (conftest.Operator): a conftest is not importable here.
Operator = Any
NAMESPACE = "kubevirt"
RELEASE = Path(__file__).resolve().parents[2] / "manifests" / "release"

VM = {
    "apiVersion": "kubevirt.io/v1",
    "kind": "VirtualMachine",
    "metadata": {"name": "kvo-workload", "namespace": "default"},
    "spec": {
        "runStrategy": "Halted",
        "template": {"spec": {"domain": {"devices": {}, "memory": {"guest": "64Mi"}}}},
    },
}
MANAGED = "app.kubernetes.io/managed-by=virt-operator"
KINDS = "deployments,daemonsets,services,secrets,configmaps,serviceaccounts,roles,rolebindings"
CLUSTER_KINDS = (
    "customresourcedefinitions,clusterroles,clusterrolebindings,"
    "validatingwebhookconfigurations,mutatingwebhookconfigurations,apiservices"
)


def managed(op: Operator) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for kinds, scope in ((KINDS, ["-A"]), (CLUSTER_KINDS, [])):
        found = op.kubectl.run("get", kinds, *scope, "-l", MANAGED, "-o", "json")
        items += json.loads(found.stdout)["items"]
    return items


def test_install_goes_in_order_to_deployed_and_available(operator: Operator) -> None:
    op = operator
    # A workload that exists before the install: its CRD (from the session's manifests/crds)
    # is taken over by the operator; the VM is what BlockUninstall guards below.
    op.kubectl.run("apply", "-f", "-", stdin=json.dumps(VM))
    op.kubectl.run("apply", "-f", str(RELEASE / "kubevirt-cr.yaml"))
    op.wait("virt-api's Deployment", lambda: op.get("deployment", "virt-api"), timeout=180)
    conditions = op.conditions()
    assert conditions["Progressing"] == ("True", "DeploymentInProgress")
    assert conditions["Available"] == ("False", "DeploymentInProgress")
    assert op.kubevirt()["status"]["phase"] == "Deploying"
    # virt-controller and virt-handler wait for virt-api, which no pod serves yet.
    for secret in ("kubevirt-ca", "kubevirt-virt-api-certs", "kubevirt-virt-handler-certs"):
        assert op.get("secret", secret) is not None
    assert op.get("validatingwebhookconfiguration", "virt-api-validator", None) is not None
    assert op.get("apiservice", "v1.subresources.kubevirt.io", None) is not None
    time.sleep(3)  # a few of the operator's passes
    assert op.get("deployment", "virt-controller") is None
    assert op.get("daemonset", "virt-handler") is None
    # Pods come up (played): the rest follows, then Deployed.
    op.player.playing.set()
    op.wait(
        "Created=True", lambda: op.conditions().get("Created") == ("True", "AllResourcesCreated")
    )
    op.wait(
        "Deployed and Available",
        lambda: (
            op.kubevirt()["status"].get("phase") == "Deployed"
            and op.conditions().get("Available") == ("True", "AllComponentsReady")
        ),
        timeout=90,
    )
    status = op.kubevirt()["status"]
    assert status["observedKubeVirtVersion"] == status["targetKubeVirtVersion"] == "itest"
    assert status["operatorVersion"] == "itest"
    assert "kubevirt.io/foregroundDeleteKubeVirt" in op.kubevirt()["metadata"]["finalizers"]
    strategies = op.kubectl.run(
        "get", "configmaps", "-n", NAMESPACE, "-l", "kubevirt.io/install-strategy", "-o", "name"
    ).stdout.split()
    assert len(strategies) == 1


def test_a_settled_install_writes_nothing(operator: Operator) -> None:
    before = {
        (o["kind"], o["metadata"]["name"]): o["metadata"]["resourceVersion"]
        for o in managed(operator)
    }
    time.sleep(12)  # more than one resync of the operator (10 s)
    after = {
        (o["kind"], o["metadata"]["name"]): o["metadata"]["resourceVersion"]
        for o in managed(operator)
    }
    changed = [k for k in before if after.get(k) != before[k]]
    # Workloads' status moves with the played pods; nothing else may be rewritten.
    assert [k for k in changed if k[0] not in ("Deployment", "DaemonSet")] == []


def test_a_deleted_virt_api_deployment_comes_back_within_30s(operator: Operator) -> None:
    op = operator
    old = op.get("deployment", "virt-api")
    assert old is not None
    op.kubectl.run("delete", "deployment", "virt-api", "-n", NAMESPACE, "--wait=false")
    t0 = time.monotonic()
    op.wait(
        "virt-api's Deployment again",
        lambda: (
            (d := op.get("deployment", "virt-api")) is not None
            and d["metadata"]["uid"] != old["metadata"]["uid"]
        ),
        timeout=30,
    )
    assert time.monotonic() - t0 < 30


def test_an_edited_handler_image_is_put_back_within_30s(operator: Operator) -> None:
    op = operator
    ds = op.get("daemonset", "virt-handler")
    assert ds is not None
    want = ds["spec"]["template"]["spec"]["containers"][0]["image"]
    op.kubectl.run(
        "set", "image", "daemonset/virt-handler", "-n", NAMESPACE, "virt-handler=evil/handler:x"
    )

    def image() -> str:
        now = op.get("daemonset", "virt-handler") or {}
        return str(now["spec"]["template"]["spec"]["containers"][0]["image"]) if now else ""

    op.wait("the handler image put back", lambda: image() == want, timeout=30)


def test_block_uninstall_if_workloads_exist_refuses_the_delete(operator: Operator) -> None:
    op = operator
    op.wait("Deployed again", lambda: op.kubevirt()["status"].get("phase") == "Deployed", 60)
    op.kubectl.run(
        "patch",
        "kv",
        "kubevirt",
        "-n",
        NAMESPACE,
        "--type=merge",
        "-p",
        '{"spec":{"uninstallStrategy":"BlockUninstallIfWorkloadsExist"}}',
    )
    refused = op.kubectl.run(
        "delete", "kv", "kubevirt", "-n", NAMESPACE, "--wait=false", check=False
    )
    assert refused.returncode != 0
    assert "Rejecting the uninstall request, since there are still Virtual Machines present" in (
        refused.stderr
    )
    assert not op.kubevirt()["metadata"].get("deletionTimestamp")


def test_deleting_the_cr_without_workloads_removes_everything_installed(
    operator: Operator,
) -> None:
    op = operator
    op.kubectl.run("delete", "vm", VM["metadata"]["name"], "-n", "default")
    op.kubectl.run("delete", "kv", "kubevirt", "-n", NAMESPACE, "--wait=false")
    op.wait(
        "the KubeVirt CR gone",
        lambda: op.get("kv", "kubevirt") is None,
        timeout=90,
    )
    assert managed(op) == []
    for kind, name, namespace in (
        ("deployment", "virt-api", NAMESPACE),
        ("daemonset", "virt-handler", NAMESPACE),
        ("crd", "virtualmachines.kubevirt.io", None),
        ("validatingwebhookconfiguration", "virt-operator-validator", None),
    ):
        assert op.get(kind, name, namespace) is None, (kind, name)
    # What came with the operator stays: the KubeVirt CRD and the operator's own RBAC.
    assert op.get("crd", "kubevirts.kubevirt.io", None) is not None
    assert op.get("clusterrole", "kubevirt-operator", None) is not None
