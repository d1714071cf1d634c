"""virt-operator end to end: the release manifests install kubevirt-py, the operator keeps
it so, upgrades it under a running guest, and guards and performs the uninstall.

Needs a cluster installed through the operator, as `kv-cluster up` installs by default
(it applies `kubevirt-operator.yaml`, then the KubeVirt CR, nothing else). The upgrade's "second build" is the same images pushed under
a second tag: the tag is the version, so every component's pod template changes and rolls.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

import pytest
from kv_cluster.kubevirt_pods import operator_mode
from kv_cluster.registry import registry_endpoint
from kv_images import Builder, HttpRegistry, Layout, Progress, find_workspace
from virt_operator.wellknown import FINALIZER

pytestmark = pytest.mark.e2e

NAMESPACE = "kubevirt"
WORKLOADS = (
    ("deployment", "virt-api"),
    ("deployment", "virt-controller"),
    ("daemonset", "virt-handler"),
)
_UPTIME = re.compile(r"^(\d+\.\d+) \d+\.\d+\s*$", re.MULTILINE)


@pytest.fixture(scope="module")
def installed(kubevirt: Any, kube: Any) -> Any:
    ctx = kube.require_local()._context()
    if not operator_mode(ctx):
        pytest.fail(
            "needs the cluster installed by virt-operator (unset KV_CLUSTER_KUBEVIRT: pods and "
            "host are developer modes)"
        )
    return kubevirt


def _kv(env: Any) -> dict[str, Any]:
    found = env.get("kubevirt", "kubevirt", NAMESPACE)
    assert found is not None, "no KubeVirt CR"
    return dict(found)


def _conditions(env: Any) -> dict[str, tuple[str, str]]:
    return {
        c["type"]: (c["status"], c["reason"])
        for c in (_kv(env).get("status") or {}).get("conditions") or []
    }


def _image(env: Any, kind: str, name: str) -> str:
    obj = env.get(kind, name, NAMESPACE) or {}
    containers = ((obj.get("spec") or {}).get("template") or {}).get("spec", {}).get("containers")
    return str(containers[0]["image"]) if containers else ""


def _patch_kv(env: Any, kind: str, patch: str) -> None:
    env.kubectl.run("patch", "kv", "kubevirt", "-n", NAMESPACE, f"--type={kind}", "-p", patch)


def _uptime(env: Any, name: str, namespace: str) -> float:
    readings = _UPTIME.findall(env.in_guest(name, namespace, "cat /proc/uptime"))
    assert readings, "no /proc/uptime line in the guest's answer"
    return float(readings[-1])


def test_the_release_manifests_install_to_available_and_a_vm_boots(
    installed: Any, namespace: str
) -> None:
    env = installed
    kv = _kv(env)
    assert FINALIZER in kv["metadata"]["finalizers"]
    status = kv["status"]
    assert status["phase"] == "Deployed"
    assert _conditions(env)["Available"] == ("True", "AllComponentsReady")
    assert _conditions(env)["Created"] == ("True", "AllResourcesCreated")
    assert status["observedKubeVirtVersion"] == status["targetKubeVirtVersion"]
    # Everything was installed by the operator (its label), the CRDs included.
    crd = json.loads(
        env.kubectl.run("get", "crd", "virtualmachines.kubevirt.io", "-o", "json").stdout
    )
    assert crd["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "virt-operator"
    env.apply(env.vm("boot"), namespace)
    env.wait_running("boot", namespace)
    assert env.marker in env.console_marker("boot", namespace)


def test_a_deleted_virt_api_deployment_is_back_within_30s(installed: Any) -> None:
    env = installed
    old = env.get("deployment", "virt-api", NAMESPACE)
    assert old is not None
    env.kubectl.run("delete", "deployment", "virt-api", "-n", NAMESPACE, "--wait=false")
    env.wait_for(
        "virt-api's Deployment re-created",
        lambda: (
            (d := env.get("deployment", "virt-api", NAMESPACE)) is not None
            and d["metadata"]["uid"] != old["metadata"]["uid"]
        ),
        30,
    )
    env.wait_for(
        "Available again", lambda: _conditions(env).get("Available", ("",))[0] == "True", 180
    )


def test_an_edited_handler_image_is_put_back_within_30s(installed: Any) -> None:
    env = installed
    want = _image(env, "daemonset", "virt-handler")
    env.kubectl.run(
        "set",
        "image",
        "daemonset/virt-handler",
        "-n",
        NAMESPACE,
        "virt-handler=example.invalid/h:x",
    )
    env.wait_for(
        "the handler's image put back", lambda: _image(env, "daemonset", "virt-handler") == want, 30
    )


def test_a_new_image_tag_rolls_every_component_under_a_running_guest(
    installed: Any, kube: Any, namespace: str
) -> None:
    env = installed
    ctx = kube.require_local()._context()
    old_tag = _kv(env)["status"]["observedKubeVirtVersion"]
    new_tag = f"{old_tag}-b2"
    builder = Builder(find_workspace(), Layout.default(), Progress())
    images = ("virt-api", "virt-controller", "virt-handler", "virt-launcher", "virt-operator")
    built = [b for b in builder.build(images) if b.name in images]
    builder.push_to(built, HttpRegistry(registry_endpoint(ctx)), tags=[new_tag])
    env.apply(env.vm("keeps-running"), namespace)
    vmi = env.wait_running("keeps-running", namespace)
    env.console_marker("keeps-running", namespace)
    before, t0 = _uptime(env, "keeps-running", namespace), time.monotonic()
    _patch_kv(env, "merge", json.dumps({"spec": {"imageTag": new_tag}}))
    env.wait_for(
        "UpdateInProgress reported",
        lambda: (
            _conditions(env).get("Progressing") == ("True", "UpdateInProgress")
            or _kv(env)["status"].get("observedKubeVirtVersion") == new_tag
        ),
        60,
    )
    env.wait_for(
        f"observedKubeVirtVersion {new_tag} and Available",
        lambda: (
            _kv(env)["status"].get("observedKubeVirtVersion") == new_tag
            and _conditions(env).get("Available") == ("True", "AllComponentsReady")
        ),
        600,
    )
    for kind, name in WORKLOADS:
        assert _image(env, kind, name).endswith(f"/{name}:{new_tag}"), (kind, name)
    after = env.get("vmi", "keeps-running", namespace)
    assert after is not None
    assert after["metadata"]["uid"] == vmi["metadata"]["uid"]
    assert after["status"]["phase"] == "Running"
    now = _uptime(env, "keeps-running", namespace)
    # A reboot would restart the count; TCG guests' clocks may lag the host's, hence the half.
    assert now >= before + (time.monotonic() - t0) * 0.5, (
        f"uptime {before} -> {now}: the guest restarted during the upgrade"
    )


def test_block_uninstall_refuses_while_a_vm_exists(installed: Any, namespace: str) -> None:
    env = installed
    env.apply(env.vm("guarded", run_strategy="Halted"), namespace)
    _patch_kv(env, "merge", '{"spec":{"uninstallStrategy":"BlockUninstallIfWorkloadsExist"}}')
    try:
        refused = env.kubectl.run(
            "delete", "kv", "kubevirt", "-n", NAMESPACE, "--wait=false", check=False
        )
        assert refused.returncode != 0
        assert "Rejecting the uninstall request" in refused.stderr
        assert not _kv(env)["metadata"].get("deletionTimestamp")
    finally:
        _patch_kv(env, "json", '[{"op":"remove","path":"/spec/uninstallStrategy"}]')


def test_deleting_the_cr_without_vms_removes_what_it_installed(installed: Any, kube: Any) -> None:
    env = installed
    env.kubectl.run("delete", "vm", "--all", "-A", "--wait=true", timeout=300)
    env.wait_for(
        "no VMIs left",
        lambda: not json.loads(env.kubectl.run("get", "vmi", "-A", "-o", "json").stdout)["items"],
        300,
    )
    try:
        env.kubectl.run("delete", "kv", "kubevirt", "-n", NAMESPACE, "--wait=false")
        env.wait_for("the CR gone", lambda: env.get("kubevirt", "kubevirt", NAMESPACE) is None, 300)
        left = json.loads(
            env.kubectl.run(
                "get",
                "deployments,daemonsets,services,secrets,configmaps,crd,clusterroles,"
                "validatingwebhookconfigurations,mutatingwebhookconfigurations,apiservices",
                "-A",
                "-l",
                "app.kubernetes.io/managed-by=virt-operator",
                "-o",
                "json",
            ).stdout
        )["items"]
        assert [f"{o['kind']}/{o['metadata']['name']}" for o in left] == []
        assert env.get("deployment", "virt-operator", NAMESPACE) is not None
    finally:
        # Put KubeVirt back for the session's other tests: the same two applies.
        kube.require_local().up()
