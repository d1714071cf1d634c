"""The operator's pass against an in-memory API server: order, status, drift, upgrade,
uninstall."""

from __future__ import annotations

import pytest
from kubevirt_api.resources import KUBEVIRTS
from virt_operator.fakes import FakeClock, FakeCluster, kubevirt
from virt_operator.reconcile import KubeVirtReconciler
from virt_operator.wellknown import FINALIZER


def conditions(cluster: FakeCluster) -> dict[str, tuple[str, str]]:
    status = cluster.obj("kubevirts", "kubevirt").get("status", {})
    return {c["type"]: (c["status"], c["reason"]) for c in status.get("conditions", [])}


def status(cluster: FakeCluster) -> dict[str, object]:
    return dict(cluster.obj("kubevirts", "kubevirt").get("status", {}))


def applied_kinds(cluster: FakeCluster) -> list[str]:
    return [kind for verb, kind, _ in cluster.writes if verb == "apply"]


async def deployed(cluster: FakeCluster, operator: KubeVirtReconciler) -> None:
    await operator.reconcile("kubevirt/kubevirt")
    cluster.roll_out("deployments", "virt-api")
    await operator.reconcile("kubevirt/kubevirt")
    cluster.roll_out("deployments", "virt-controller")
    cluster.roll_out("daemonsets", "virt-handler")
    await operator.reconcile("kubevirt/kubevirt")


async def test_first_pass_creates_in_upstreams_order_and_waits_for_virt_api(
    cluster: FakeCluster, operator: KubeVirtReconciler
) -> None:
    cluster.put(KUBEVIRTS, kubevirt())
    result = await operator.reconcile("kubevirt/kubevirt")
    kinds = applied_kinds(cluster)
    # Strategy, CRDs, RBAC, Services, certificates, registrations, then virt-api alone.
    first = {k: kinds.index(k) for k in dict.fromkeys(kinds)}
    assert kinds[0] == "ConfigMap"
    assert (
        first["CustomResourceDefinition"]
        < first["ServiceAccount"]
        < first["Service"]
        < first["Secret"]
        < first["MutatingWebhookConfiguration"]
        < first["APIService"]
        < first["Deployment"]
    )
    assert cluster.has("deployments", "virt-api")
    assert not cluster.has("deployments", "virt-controller")
    assert not cluster.has("daemonsets", "virt-handler")
    assert result is not None
    assert result.requeue_after is not None
    assert status(cluster)["phase"] == "Deploying"
    assert conditions(cluster)["Progressing"] == ("True", "DeploymentInProgress")
    assert conditions(cluster)["Available"] == ("False", "DeploymentInProgress")
    assert FINALIZER in cluster.obj("kubevirts", "kubevirt")["metadata"]["finalizers"]


async def test_all_ready_is_deployed_and_available_with_versions(
    cluster: FakeCluster, operator: KubeVirtReconciler
) -> None:
    cluster.put(KUBEVIRTS, kubevirt())
    await operator.reconcile("kubevirt/kubevirt")
    cluster.roll_out("deployments", "virt-api")
    await operator.reconcile("kubevirt/kubevirt")
    assert cluster.has("deployments", "virt-controller")
    assert cluster.has("daemonsets", "virt-handler")
    assert conditions(cluster)["Created"] == ("True", "AllResourcesCreated")
    assert status(cluster)["phase"] == "Deploying"
    cluster.roll_out("deployments", "virt-controller")
    cluster.roll_out("daemonsets", "virt-handler")
    await operator.reconcile("kubevirt/kubevirt")
    got = status(cluster)
    assert got["phase"] == "Deployed"
    assert conditions(cluster)["Available"] == ("True", "AllComponentsReady")
    assert conditions(cluster)["Progressing"] == ("False", "AllComponentsReady")
    assert conditions(cluster)["Degraded"] == ("False", "AllComponentsReady")
    assert got["observedKubeVirtVersion"] == got["targetKubeVirtVersion"] == "v1"
    assert got["observedKubeVirtRegistry"] == "registry.example/kubevirt-py"
    assert got["operatorVersion"] == "v1"
    image = cluster.obj("daemonsets", "virt-handler")["spec"]["template"]["spec"]["containers"][0]
    assert image["image"] == "registry.example/kubevirt-py/virt-handler:v1"


async def test_a_settled_install_writes_nothing(
    cluster: FakeCluster, operator: KubeVirtReconciler
) -> None:
    cluster.put(KUBEVIRTS, kubevirt())
    await deployed(cluster, operator)
    cluster.writes.clear()
    await operator.reconcile("kubevirt/kubevirt")
    assert cluster.writes == []


async def test_a_deleted_deployment_and_an_edited_image_come_back(
    cluster: FakeCluster, operator: KubeVirtReconciler
) -> None:
    cluster.put(KUBEVIRTS, kubevirt())
    await deployed(cluster, operator)
    del cluster.objects[("deployments", "kubevirt", "virt-api")]
    handler = cluster.obj("daemonsets", "virt-handler")
    handler["spec"]["template"]["spec"]["containers"][0]["image"] = "evil/virt-handler:x"
    cluster.writes.clear()
    await operator.reconcile("kubevirt/kubevirt")
    assert ("apply", "Deployment", "virt-api") in cluster.writes
    assert ("apply", "DaemonSet", "virt-handler") in cluster.writes
    again = cluster.obj("daemonsets", "virt-handler")["spec"]["template"]["spec"]["containers"][0]
    assert again["image"] == "registry.example/kubevirt-py/virt-handler:v1"


async def test_configuration_changes_restart_nothing(
    cluster: FakeCluster, operator: KubeVirtReconciler
) -> None:
    cluster.put(KUBEVIRTS, kubevirt())
    await deployed(cluster, operator)
    kv = cluster.obj("kubevirts", "kubevirt")
    kv["spec"]["configuration"] = {
        "developerConfiguration": {"useEmulation": True, "featureGates": ["Snapshot"]}
    }
    cluster.writes.clear()
    await operator.reconcile("kubevirt/kubevirt")
    assert not [w for w in cluster.writes if w[1] in ("Deployment", "DaemonSet")]


async def test_a_new_tag_rolls_the_handler_first_and_reports_the_update(
    cluster: FakeCluster, operator: KubeVirtReconciler
) -> None:
    cluster.put(KUBEVIRTS, kubevirt())
    await deployed(cluster, operator)
    cluster.obj("kubevirts", "kubevirt")["spec"]["imageTag"] = "v2"
    cluster.writes.clear()
    await operator.reconcile("kubevirt/kubevirt")
    workloads = [n for verb, kind, n in cluster.writes if kind in ("Deployment", "DaemonSet")]
    assert workloads == ["virt-handler"]
    assert conditions(cluster)["Available"] == ("True", "UpdateInProgress")
    assert conditions(cluster)["Progressing"] == ("True", "UpdateInProgress")
    assert conditions(cluster)["Degraded"] == ("True", "UpdateInProgress")
    assert status(cluster)["phase"] == "Deployed"
    assert status(cluster)["targetKubeVirtVersion"] == "v2"
    assert status(cluster)["observedKubeVirtVersion"] == "v1"
    cluster.roll_out("daemonsets", "virt-handler")
    await operator.reconcile("kubevirt/kubevirt")
    cluster.roll_out("deployments", "virt-controller")
    await operator.reconcile("kubevirt/kubevirt")
    cluster.roll_out("deployments", "virt-api")
    cluster.writes.clear()
    await operator.reconcile("kubevirt/kubevirt")
    assert status(cluster)["observedKubeVirtVersion"] == "v2"
    assert conditions(cluster)["Available"] == ("True", "AllComponentsReady")
    for plural, name in (
        ("deployments", "virt-api"),
        ("deployments", "virt-controller"),
        ("daemonsets", "virt-handler"),
    ):
        (container,) = cluster.obj(plural, name)["spec"]["template"]["spec"]["containers"]
        assert container["image"].endswith(f"/{name}:v2")
    # The old install strategy's ConfigMap is gone once the new one rolled over.
    strategies = [
        n for (p, _ns, n) in cluster.objects if p == "configmaps" and "install-strategy" in n
    ]
    assert len(strategies) == 1


async def test_deletion_removes_everything_installed_then_the_finalizer(
    cluster: FakeCluster, operator: KubeVirtReconciler
) -> None:
    cluster.put(KUBEVIRTS, kubevirt())
    await deployed(cluster, operator)
    user_secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "mine", "namespace": "kubevirt"},
    }
    from virt_operator.resources import SECRETS

    cluster.put(SECRETS, user_secret)
    cluster.obj("kubevirts", "kubevirt")["metadata"]["deletionTimestamp"] = "2026-12-01T12:00:00Z"
    await operator.reconcile("kubevirt/kubevirt")
    assert status(cluster)["phase"] == "Deleting"
    assert conditions(cluster)["Degraded"] == ("True", "DeletionInProgress")
    await operator.reconcile("kubevirt/kubevirt")
    left = sorted(p for (p, _ns, _n) in cluster.objects)
    assert left == ["secrets"]  # the user's, never labelled as ours
    assert not cluster.has("kubevirts", "kubevirt")


async def test_a_second_kubevirt_is_not_synchronized(
    cluster: FakeCluster, operator: KubeVirtReconciler
) -> None:
    cluster.put(KUBEVIRTS, kubevirt())
    second = kubevirt()
    second["metadata"]["name"] = "second"
    cluster.put(KUBEVIRTS, second)
    await operator.reconcile("kubevirt/second")
    got = cluster.obj("kubevirts", "second")["status"]["conditions"]
    assert [(c["type"], c["status"], c["reason"]) for c in got] == [
        ("Synchronized", "False", "ExistingDeployment")
    ]


@pytest.mark.parametrize("renew", ["leaf", "ca"])
async def test_certificates_are_renewed_before_expiry(
    cluster: FakeCluster, operator: KubeVirtReconciler, clock: FakeClock, renew: str
) -> None:
    import datetime

    cluster.put(KUBEVIRTS, kubevirt())
    await deployed(cluster, operator)
    ca = cluster.obj("secrets", "kubevirt-ca")["data"]["tls.crt"]
    api = cluster.obj("secrets", "kubevirt-virt-api-certs")["data"]["tls.crt"]
    # A leaf lives a day and is renewed with a fifth left; the CA lives 7 days.
    hours = 20 if renew == "leaf" else 24 * 6
    clock.now += datetime.timedelta(hours=hours)
    await operator.reconcile("kubevirt/kubevirt")
    assert cluster.obj("secrets", "kubevirt-virt-api-certs")["data"]["tls.crt"] != api
    new_ca = cluster.obj("secrets", "kubevirt-ca")["data"]["tls.crt"]
    assert (new_ca != ca) == (renew == "ca")
    bundle = cluster.obj("configmaps", "kubevirt-ca")["data"]["ca-bundle"]
    # While leaves of the old CA may be in use, the bundle trusts both.
    assert bundle.count("BEGIN CERTIFICATE") == (2 if renew == "ca" else 1)


async def test_a_component_unready_after_deployment_shows_in_conditions_not_phase(
    cluster: FakeCluster, operator: KubeVirtReconciler
) -> None:
    cluster.put(KUBEVIRTS, kubevirt())
    await deployed(cluster, operator)
    cluster.obj("daemonsets", "virt-handler")["status"]["numberReady"] = 0
    await operator.reconcile("kubevirt/kubevirt")
    assert status(cluster)["phase"] == "Deployed"
    assert conditions(cluster)["Available"] == ("False", "DeploymentInProgress")
    assert conditions(cluster)["Created"] == ("True", "AllResourcesCreated")
