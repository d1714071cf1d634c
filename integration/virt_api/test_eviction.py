"""Evicting a live-migratable VMI's launcher pod through the real API server (what
`kubectl drain` does) is refused with 429 by virt-api's eviction interceptor, which marks
the VMI with status.evacuationNodeName instead; `virtctl evacuate-cancel` clears it."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from typing import Any

NODE = "kvt-evicted-node"


def test_eviction_of_a_migratable_vmi_marks_it_instead(
    kube: Any,
    namespace: str,
    virt_api: Any,
    get_json: Callable[..., Any],
    virtctl: Callable[..., subprocess.CompletedProcess[str]],
    evictable_vmi: Callable[[str], dict[str, Any]],
) -> None:
    pod = evictable_vmi(NODE)
    # What virt-handler reports for a running, migratable guest on that node.
    status = {
        "status": {
            "phase": "Running",
            "nodeName": NODE,
            "conditions": [{"type": "LiveMigratable", "status": "True"}],
        }
    }

    def report_running() -> None:
        kube.kubectl.run(
            "patch", "vmi", "drained", "-n", namespace, "--type=merge", "-p", json.dumps(status)
        )

    report_running()
    eviction = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": pod["metadata"]["name"], "namespace": namespace},
    }

    def evict() -> subprocess.CompletedProcess[str]:
        path = f"/api/v1/namespaces/{namespace}/pods/{pod['metadata']['name']}/eviction"
        result: subprocess.CompletedProcess[str] = kube.kubectl.run(
            "create", "--raw", path, "-f", "-", stdin=json.dumps(eviction), check=False
        )
        return result

    answer = evict()
    # A virt-controller running on this cluster may rewrite the status we played between
    # our patch and the eviction; play it again, a few times at most.
    for _ in range(5):
        if "Eviction triggered" in answer.stderr:
            break
        report_running()
        answer = evict()
    assert answer.returncode != 0
    # 429: kubectl drain retries until the VMI has left and the pod may go.
    assert answer.stderr.startswith("Error from server (TooManyRequests)"), answer.stderr
    assert f'Eviction triggered evacuation of VMI "{namespace}/drained"' in answer.stderr
    marked = get_json("vmi", "drained", "-n", namespace)
    assert marked["status"]["evacuationNodeName"] == NODE
    assert get_json("pod", pod["metadata"]["name"], "-n", namespace)["metadata"]["name"]
    # A second eviction is refused while the evacuation is in progress.
    again = evict()
    assert "Evacuation in progress" in again.stderr, again.stderr
    done = virtctl(kube.kubeconfig, "evacuate-cancel", "vmi", "drained", "-n", namespace)
    assert done.returncode == 0, done.stderr
    assert "evacuationNodeName" not in get_json("vmi", "drained", "-n", namespace)["status"]
