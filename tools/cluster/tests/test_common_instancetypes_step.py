"""`up` installs the common instancetypes and preferences, unless the KubeVirt CR opts out."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from kv_cluster.common_instancetypes import CommonInstancetypes
from kv_cluster.kubectl import Kubectl
from kv_cluster.plan import KUBEVIRT_CONFIG, KUBEVIRT_CRDS

MANAGED = "app.kubernetes.io/managed-by=kv-cluster"


class FakeKubectl(Kubectl):
    """Answers `get kubevirts` with `kubevirt` (None: not found); records every call."""

    def __init__(self, kubevirt: dict[str, Any] | None, deleted: str = "") -> None:
        super().__init__(Path("/nonexistent/kubeconfig"), binary=Path("/bin/false"))
        self.kubevirt = kubevirt
        self.deleted = deleted
        self.calls: list[tuple[tuple[str, ...], str | None]] = []

    def run(
        self, *args: str, stdin: str | None = None, check: bool = True, timeout: float = 120.0
    ) -> subprocess.CompletedProcess[str]:
        self.calls.append((args, stdin))
        if args[0] == "get":
            if self.kubevirt is None:
                return subprocess.CompletedProcess(list(args), 1, "", "NotFound")
            body = {"kind": "KubeVirtList", "items": [self.kubevirt]}
            return subprocess.CompletedProcess(list(args), 0, json.dumps(body), "")
        if args[0] == "delete":
            return subprocess.CompletedProcess(list(args), 0, self.deleted, "")
        return subprocess.CompletedProcess(list(args), 0, "", "")

    def verbs(self) -> list[str]:
        return [args[0] for args, _ in self.calls]

    def applied(self) -> list[dict[str, Any]]:
        (body,) = [stdin for args, stdin in self.calls if args[0] == "apply"]
        assert body is not None
        items: list[dict[str, Any]] = json.loads(body)["items"]
        return items


def _kubevirt(configuration: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "KubeVirt",
        "metadata": {"name": "kubevirt", "namespace": "kubevirt"},
        "spec": {"configuration": configuration},
    }


def test_a_stock_cr_gets_every_instancetype_and_preference_server_side() -> None:
    kubectl = FakeKubectl(_kubevirt({"developerConfiguration": {"useEmulation": True}}))
    action = CommonInstancetypes(kubectl, after_kubevirt_cr=True).ensure()
    assert action == "65 instancetypes and 54 preferences applied"
    assert kubectl.verbs() == ["get", "apply"]
    (apply_args,) = [args for args, _ in kubectl.calls if args[0] == "apply"]
    assert "--server-side" in apply_args
    assert "--field-manager=kv-cluster" in apply_args
    items = kubectl.applied()
    kinds = {o["kind"] for o in items}
    assert kinds == {"VirtualMachineClusterInstancetype", "VirtualMachineClusterPreference"}
    small = next(o for o in items if o["metadata"]["name"] == "u1.small")
    assert small["spec"] == {"cpu": {"guest": 1}, "memory": {"guest": "2Gi"}}
    labels = small["metadata"]["labels"]
    assert labels["app.kubernetes.io/managed-by"] == "kv-cluster"
    assert labels["instancetype.kubevirt.io/class"] == "general.purpose"


def test_no_kubevirt_cr_is_a_stock_install() -> None:
    kubectl = FakeKubectl(None)
    CommonInstancetypes(kubectl, after_kubevirt_cr=False).ensure()
    assert kubectl.verbs() == ["get", "apply"]
    assert len(kubectl.applied()) == 119


def test_opting_out_applies_nothing_and_removes_what_kv_cluster_installed() -> None:
    kubectl = FakeKubectl(
        _kubevirt({"commonInstancetypesDeployment": {"enabled": False}}),
        deleted="virtualmachineclusterinstancetype.instancetype.kubevirt.io/u1.small\n"
        "virtualmachineclusterpreference.instancetype.kubevirt.io/fedora\n",
    )
    action = CommonInstancetypes(kubectl, after_kubevirt_cr=True).ensure()
    assert "apply" not in kubectl.verbs()
    (delete_args,) = [args for args, _ in kubectl.calls if args[0] == "delete"]
    assert MANAGED in delete_args  # only ours: a user's own instancetypes stay
    assert "virtualmachineclusterinstancetypes.instancetype.kubevirt.io," in delete_args[1]
    assert action == "opted out (commonInstancetypesDeployment.enabled: false), 2 removed"


def test_enabled_true_or_unset_installs() -> None:
    for configuration in ({"commonInstancetypesDeployment": {"enabled": True}}, {}):
        kubectl = FakeKubectl(_kubevirt(configuration))
        CommonInstancetypes(kubectl, after_kubevirt_cr=True).ensure()
        assert kubectl.verbs() == ["get", "apply"]


def test_a_rerun_applies_the_same_body() -> None:
    """Server-side apply of an unchanged body writes nothing: `up` twice is `up` once."""
    first, second = FakeKubectl(None), FakeKubectl(None)
    CommonInstancetypes(first, after_kubevirt_cr=False).ensure()
    CommonInstancetypes(second, after_kubevirt_cr=False).ensure()
    assert first.calls == second.calls


def test_it_waits_for_the_kubevirt_cr_only_when_this_up_makes_one() -> None:
    kubectl = FakeKubectl(None)
    with_cr = CommonInstancetypes(kubectl, after_kubevirt_cr=True)
    without = CommonInstancetypes(kubectl, after_kubevirt_cr=False)
    assert with_cr.requires == {KUBEVIRT_CRDS, KUBEVIRT_CONFIG}
    assert without.requires == {KUBEVIRT_CRDS}


def test_with_virt_api_in_this_up_the_objects_wait_for_its_webhooks() -> None:
    """An older virt-api still registered would otherwise judge them (and may refuse them)."""
    from kv_cluster.plan import KUBEVIRT_ADMISSION, KUBEVIRT_CONFIG, KUBEVIRT_CRDS, order

    class Step:
        def __init__(self, name: str, requires: set[str], provides: set[str]) -> None:
            self.name, self.requires, self.provides = name, frozenset(requires), frozenset(provides)

    step = CommonInstancetypes(FakeKubectl(None), after_kubevirt_cr=True, after_admission=True)
    others = [
        Step("crds", set(), {KUBEVIRT_CRDS}),
        Step("kubevirt-cr", {KUBEVIRT_CRDS}, {KUBEVIRT_CONFIG}),
        Step("kubevirt", {KUBEVIRT_CONFIG}, {KUBEVIRT_ADMISSION}),
    ]
    names = [s.name for s in order([others[0], others[1], step, others[2]])]
    assert names == ["crds", "kubevirt-cr", "kubevirt", "common-instancetypes"]
