"""`kubectl drain` of a node with a live-migratable VMI, through the real API server and
virt-api's eviction interceptor, on a node-less cluster: the test plays kubelet, the
controller and the handlers (it ends the migration by moving the VMI and finishing the
pod). What drain itself does with KubeVirt's answers: it cordons the node, takes the
launcher pod's 429 as "retry in 5 s" while the VMI is marked for evacuation, needs no
`--force` (the pod has the VMI as its controller), and once the emptied pod has finished
its eviction passes and drain completes."""

from __future__ import annotations

import json
import secrets
import subprocess
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kv_cluster.slots import private_env

# The session's cluster runs virt-controller, which took this VMI for its own: it created a
# launcher pod of its own, then deleted both pods and failed the VMI the test had reported
# Running. The test plays the controller, so it gets a control plane with virt-api only.
PRIVATE_ENV = private_env("drain", kube_proxy=False)
PRIVATE_VIRT_API = True


@pytest.fixture(scope="module")
def kube(private_control_plane: Any) -> Any:
    """This module's own control plane (it shadows the session's `kube`)."""
    return private_control_plane


@pytest.fixture
def drained_node(kube: Any) -> Iterator[str]:
    """A Node object no kubelet runs (deleted afterwards)."""
    name = f"kvt-drain-{secrets.token_hex(3)}"
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
    }
    kube.kubectl.run("create", "-f", "-", stdin=json.dumps(node))
    yield name
    kube.kubectl.run("delete", "node", name, "--wait=false", check=False)


def test_kubectl_drain_waits_for_the_vmi_to_migrate_then_evicts_its_emptied_pod(
    kube: Any,
    namespace: str,
    drained_node: str,
    get_json: Callable[..., Any],
    wait_for: Callable[..., Any],
    evictable_vmi: Callable[[str], dict[str, Any]],
) -> None:
    pod = evictable_vmi(drained_node)
    pod_name = pod["metadata"]["name"]

    def report(status: dict[str, Any]) -> None:
        kube.kubectl.run(
            "patch", "vmi", "drained", "-n", namespace, "--type=merge",
            "-p", json.dumps({"status": status}),
        )  # fmt: skip

    # What virt-handler reports for a running, migratable guest on that node.
    report(
        {
            "phase": "Running",
            "nodeName": drained_node,
            "conditions": [{"type": "LiveMigratable", "status": "True"}],
        }
    )
    drain = subprocess.Popen(
        [
            str(kube.kubectl.binary), f"--kubeconfig={kube.kubectl.kubeconfig}", "drain",
            drained_node, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=120s",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        marked = wait_for(
            lambda: (get_json("vmi", "drained", "-n", namespace)["status"]).get(
                "evacuationNodeName"
            ),
            60,
            "the eviction webhook to mark the VMI",
        )
        assert marked == drained_node
        node = get_json("node", drained_node)
        assert node["spec"].get("unschedulable") is True, "drain cordons first"
        assert drain.poll() is None, "drain waits while the VMI is still on the node"
        assert (
            get_json("pod", pod_name, "-n", namespace)["metadata"].get("deletionTimestamp") is None
        )

        # The migration's end, as the handlers and the launcher make it: the VMI runs on
        # the target node, the source launcher exits and its pod completes.
        report({"nodeName": f"{drained_node}-target"})
        kube.kubectl.run(
            "patch", "pod", pod_name, "-n", namespace, "--subresource=status", "--type=merge",
            "-p", json.dumps({"status": {"phase": "Succeeded"}}),
        )  # fmt: skip
        out, err = drain.communicate(timeout=60)
    finally:
        if drain.poll() is None:
            drain.kill()
            drain.communicate()
    said = f"kubectl drain said:\n{out}\n{err}"
    assert drain.returncode == 0, said
    # The 429 was retried, not fatal; then the finished pod was evicted.
    assert f'Eviction triggered evacuation of VMI "{namespace}/drained"' in err, said
    assert "will retry after 5s" in err, said
    assert f"pod/{pod_name} evicted" in out, said
    assert f"node/{drained_node} drained" in out, said
    gone = kube.kubectl.run("get", "pod", pod_name, "-n", namespace, check=False)
    assert gone.returncode != 0, "the evicted pod is gone (a finished pod goes at once)"
    kube.kubectl.run("uncordon", drained_node)
    assert not get_json("node", drained_node)["spec"].get("unschedulable")
