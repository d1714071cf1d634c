"""The VirtualMachinePool controller against in-memory caches and a small fake API server:
names, scale out and in, per-VM names, status, template rollout and deletion, as upstream."""

from __future__ import annotations

import datetime as dt
import random
from typing import Any, cast

import pytest
from kube_runtime import (
    KubeClient,
    ManualClock,
    RawObject,
    SharedInformer,
    WorkQueue,
)
from kube_runtime.fakes import FakeApiServer, FakeListWatch
from virt_controller.objects import index_by_controller
from virt_controller.pool import POOL_KIND, PoolController
from virt_controller.poolspec import (
    POOL_FINALIZER,
    REVISION_LABEL,
    go_duration,
    indexed_vm_spec,
    max_unavailable,
    new_vm_names,
)
from virt_controller.vmi import OWNER_INDEX

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def informer(name: str, **indexers: Any) -> SharedInformer[RawObject]:
    return SharedInformer(FakeListWatch(), name=name, indexers=indexers or None)


def pool_body(replicas: int, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "pool.kubevirt.io/v1beta1",
        "kind": "VirtualMachinePool",
        "metadata": {"name": "web", "namespace": "ns"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"pool": "web"}},
            "virtualMachineTemplate": {
                "metadata": {"labels": {"pool": "web"}},
                "spec": {
                    "runStrategy": "Always",
                    "template": {
                        "metadata": {"labels": {"pool": "web"}},
                        "spec": {"domain": {"devices": {}}},
                    },
                },
            },
            **spec,
        },
    }


class Rig:
    def __init__(self, rng: random.Random | None = None) -> None:
        self.api = FakeApiServer(
            {
                "virtualmachinepools": informer("pools"),
                "virtualmachines": informer("vms", **{OWNER_INDEX: index_by_controller(POOL_KIND)}),
                "virtualmachineinstances": informer("vmis"),
                "controllerrevisions": informer(
                    "revisions", **{OWNER_INDEX: index_by_controller(POOL_KIND)}
                ),
                "persistentvolumeclaims": informer("pvcs"),
                "datavolumes": informer("dvs"),
            }
        )
        c = self.api.caches
        self.ctl = PoolController(
            cast(KubeClient, self.api),
            c["virtualmachinepools"],
            c["virtualmachines"],
            c["virtualmachineinstances"],
            c["controllerrevisions"],
            WorkQueue("pool", clock=ManualClock()),
            now=lambda: NOW,
            rng=rng or random.Random(7),
        )
        self.api.handlers = {
            "virtualmachinepools": self.ctl.on_pool,
            "virtualmachines": self.ctl.on_vm,
            "virtualmachineinstances": self.ctl.on_vmi,
            "controllerrevisions": self.ctl.on_revision,
        }

    def pool(self) -> dict[str, Any]:
        pool = self.api.obj("virtualmachinepools", "web")
        assert pool is not None
        return pool

    def vm(self, name: str) -> dict[str, Any]:
        vm = self.api.obj("virtualmachines", name)
        assert vm is not None, f"no VM {name}"
        result: dict[str, Any] = vm
        return result

    def set_pool(self, **spec: Any) -> None:
        pool = self.pool()
        pool["spec"].update(spec)
        pool["metadata"]["generation"] += 1
        self.api.put("virtualmachinepools", pool)

    def vm_names(self, *, live_only: bool = True) -> list[str]:
        return sorted(
            str(v["metadata"]["name"])
            for v in self.api.caches["virtualmachines"].store.objects()
            if not (live_only and v["metadata"].get("deletionTimestamp"))
        )

    async def settle(self, rounds: int = 20) -> None:
        """Reconcile until a pass writes nothing (the level the controller converges to)."""
        for _ in range(rounds):
            before = len(self.api.writes)
            await self.ctl.reconcile("ns/web")
            if len(self.api.writes) == before:
                return
        raise AssertionError(f"no steady state after {rounds} passes: {self.api.writes[-6:]}")


async def test_scale_out_names_vms_from_zero_with_owner_finalizer_and_revision() -> None:
    rig = Rig()
    rig.api.put("virtualmachinepools", pool_body(3))
    await rig.settle()
    assert rig.vm_names() == ["web-0", "web-1", "web-2"]
    vm = rig.vm("web-1")
    owner = vm["metadata"]["ownerReferences"][0]
    assert (owner["apiVersion"], owner["kind"], owner["name"], owner["controller"]) == (
        "pool.kubevirt.io/v1beta1",
        "VirtualMachinePool",
        "web",
        True,
    )
    assert vm["metadata"]["finalizers"] == [POOL_FINALIZER]
    assert vm["metadata"]["labels"] == {"pool": "web", REVISION_LABEL: "web-1"}
    assert vm["spec"]["template"]["metadata"]["labels"][REVISION_LABEL] == "web-1"
    assert rig.api.obj("controllerrevisions", "web-1") is not None
    status = rig.pool()["status"]
    assert (status["replicas"], status["readyReplicas"], status["labelSelector"]) == (
        3,
        0,
        "pool=web",
    )
    assert POOL_FINALIZER in rig.pool()["metadata"]["finalizers"]


async def test_a_settled_pool_writes_nothing() -> None:
    rig = Rig()
    rig.api.put("virtualmachinepools", pool_body(2))
    await rig.settle()
    before = len(rig.api.writes)
    await rig.ctl.reconcile("ns/web")
    assert rig.api.writes[before:] == []


async def test_a_deleted_vm_is_let_go_and_replaced_under_the_lowest_free_name() -> None:
    rig = Rig()
    rig.api.put("virtualmachinepools", pool_body(3))
    await rig.settle()
    await rig.api.delete(Plural("virtualmachines"), "web-1", "ns")
    assert rig.vm_names() == ["web-0", "web-2"]  # web-1 is held by our finalizer
    await rig.settle()
    assert rig.vm_names() == ["web-0", "web-1", "web-2"]
    vm = rig.vm("web-1")
    assert not vm["metadata"].get("deletionTimestamp")


async def test_scale_in_follows_the_sort_policy_and_releases_the_vms() -> None:
    rig = Rig()
    policy = {"proactive": {"selectionPolicy": {"sortPolicy": "DescendingOrder"}}}
    rig.api.put("virtualmachinepools", pool_body(3, scaleInStrategy=policy))
    await rig.settle()
    rig.set_pool(replicas=1)
    await rig.settle()
    assert rig.vm_names(live_only=False) == ["web-0"]
    assert rig.pool()["status"]["replicas"] == 1


async def test_scale_in_is_random_by_default_as_upstream() -> None:
    survivors = set()
    for seed in range(6):
        rig = Rig(random.Random(seed))
        rig.api.put("virtualmachinepools", pool_body(3))
        await rig.settle()
        rig.set_pool(replicas=1)
        await rig.settle()
        (left,) = rig.vm_names(live_only=False)
        survivors.add(left)
    assert len(survivors) > 1


async def test_unmanaged_scale_in_deletes_nothing() -> None:
    rig = Rig()
    rig.api.put("virtualmachinepools", pool_body(2, scaleInStrategy={"unmanaged": {}}))
    await rig.settle()
    rig.set_pool(replicas=0)
    await rig.settle()
    assert rig.vm_names() == ["web-0", "web-1"]


async def test_a_paused_pool_creates_nothing_and_says_so() -> None:
    rig = Rig()
    rig.api.put("virtualmachinepools", pool_body(2, paused=True))
    await rig.settle()
    assert rig.vm_names() == []
    (paused,) = rig.pool()["status"]["conditions"]
    assert (paused["type"], paused["reason"]) == ("ReplicaPaused", "SuccessfulPaused")
    rig.set_pool(paused=False)
    await rig.settle()
    assert rig.vm_names() == ["web-0", "web-1"]
    assert rig.pool()["status"]["conditions"] == []


async def test_a_failed_creation_sets_replica_failure_and_retries() -> None:
    rig = Rig()
    rig.api.fail_creates = "virtualmachines"
    rig.api.put("virtualmachinepools", pool_body(1))
    with pytest.raises(Exception, match="etcd is on holiday"):
        await rig.ctl.reconcile("ns/web")
    (failure,) = rig.pool()["status"]["conditions"]
    assert (failure["type"], failure["status"], failure["reason"]) == (
        "ReplicaFailure",
        "True",
        "FailedScaleOut",
    )
    rig.api.fail_creates = None
    rig.ctl.expectations.forget("ns/web")  # the failed creations are not awaited
    await rig.settle()
    assert rig.vm_names() == ["web-0"]
    assert rig.pool()["status"]["conditions"] == []


async def test_a_template_change_is_written_into_the_vms_keeping_their_identity() -> None:
    rig = Rig()
    rig.api.put("virtualmachinepools", pool_body(2))
    await rig.settle()
    vm = rig.vm("web-0")
    vm["spec"]["template"]["spec"]["domain"]["firmware"] = {"uuid": "u-0"}
    rig.api.put("virtualmachines", vm)
    template = rig.pool()["spec"]["virtualMachineTemplate"]
    template["spec"]["template"]["spec"]["domain"]["cpu"] = {"cores": 2}
    rig.set_pool(virtualMachineTemplate=template)
    await rig.settle()
    vm = rig.vm("web-0")
    assert vm["metadata"]["labels"][REVISION_LABEL] == "web-2"
    domain = vm["spec"]["template"]["spec"]["domain"]
    assert domain["cpu"] == {"cores": 2}
    assert domain["firmware"] == {"uuid": "u-0"}
    # No VM comes from the first revision any more: it is pruned.
    assert rig.api.obj("controllerrevisions", "web-1") is None


def running_vmi(rig: Rig, name: str, revision: str) -> None:
    vm = rig.vm(name)
    rig.api.put(
        "virtualmachineinstances",
        {
            "metadata": {
                "name": name,
                "namespace": "ns",
                "labels": {REVISION_LABEL: revision},
                "ownerReferences": [
                    {"kind": "VirtualMachine", "uid": vm["metadata"]["uid"], "controller": True}
                ],
            },
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
        },
    )
    vm["status"] = {"conditions": [{"type": "Ready", "status": "True"}]}
    rig.api.put("virtualmachines", vm)


async def test_outdated_vmis_restart_at_most_max_unavailable_at_once() -> None:
    rig = Rig()
    rig.api.put("virtualmachinepools", pool_body(3, maxUnavailable=1))
    await rig.settle()
    for name in ("web-0", "web-1", "web-2"):
        running_vmi(rig, name, "web-1")
    assert rig.pool()["status"]["readyReplicas"] == 0  # not yet reconciled
    await rig.settle()
    assert rig.pool()["status"]["readyReplicas"] == 3
    template = rig.pool()["spec"]["virtualMachineTemplate"]
    template["spec"]["template"]["spec"]["domain"]["cpu"] = {"cores": 2}
    rig.set_pool(virtualMachineTemplate=template)
    await rig.settle()
    restarted = [w for w in rig.api.writes if w[:2] == ("delete", "virtualmachineinstances")]
    assert len(restarted) == 1  # the other two wait until the first is back


async def test_an_unchanged_vmi_template_only_moves_the_vmi_label() -> None:
    rig = Rig()
    rig.api.put("virtualmachinepools", pool_body(1))
    await rig.settle()
    running_vmi(rig, "web-0", "web-1")
    template = rig.pool()["spec"]["virtualMachineTemplate"]
    template["metadata"]["annotations"] = {"note": "only the VM's metadata changed"}
    rig.set_pool(virtualMachineTemplate=template)
    await rig.settle()
    vmi = rig.api.obj("virtualmachineinstances", "web-0")
    assert vmi is not None
    assert vmi["metadata"]["labels"][REVISION_LABEL] == "web-2"
    assert not any(w[:2] == ("delete", "virtualmachineinstances") for w in rig.api.writes)


async def test_a_deleted_pool_lets_go_of_its_vms_and_itself() -> None:
    rig = Rig()
    rig.api.put("virtualmachinepools", pool_body(2))
    await rig.settle()
    await rig.api.delete(Plural("virtualmachinepools"), "web", "ns")
    await rig.settle()
    assert rig.api.obj("virtualmachinepools", "web") is None
    for name in ("web-0", "web-1"):
        vm = rig.vm(name)
        assert POOL_FINALIZER not in vm["metadata"].get("finalizers", [])


class Plural:
    """A resource handle the fake needs: only its plural."""

    def __init__(self, plural: str) -> None:
        self.plural = plural


# -- the pure rules ------------------------------------------------------------------------


def test_new_names_fill_the_lowest_free_indexes() -> None:
    taken = {"web-0", "web-2"}
    assert new_vm_names("web", 3, taken.__contains__) == ["web-1", "web-3", "web-4"]


def test_the_index_goes_into_data_volumes_and_asked_for_secrets() -> None:
    spec = {
        "nameGeneration": {"appendIndexToSecretRefs": True},
        "virtualMachineTemplate": {
            "spec": {
                "dataVolumeTemplates": [{"metadata": {"name": "root"}, "spec": {}}],
                "template": {
                    "spec": {
                        "volumes": [
                            {"name": "a", "dataVolume": {"name": "root"}},
                            {"name": "b", "persistentVolumeClaim": {"claimName": "root"}},
                            {"name": "c", "persistentVolumeClaim": {"claimName": "shared"}},
                            {
                                "name": "d",
                                "cloudInitNoCloud": {"userDataSecretRef": {"name": "ud"}},
                            },
                            {"name": "e", "configMap": {"name": "cm"}},
                            {"name": "f", "secret": {"secretName": "s"}},
                        ]
                    }
                },
            }
        },
    }
    out = indexed_vm_spec(spec, 4)
    assert out["dataVolumeTemplates"][0]["metadata"]["name"] == "root-4"
    volumes = {v["name"]: v for v in out["template"]["spec"]["volumes"]}
    assert volumes["a"]["dataVolume"]["name"] == "root-4"
    assert volumes["b"]["persistentVolumeClaim"]["claimName"] == "root-4"
    assert volumes["c"]["persistentVolumeClaim"]["claimName"] == "shared"
    assert volumes["d"]["cloudInitNoCloud"]["userDataSecretRef"]["name"] == "ud-4"
    assert volumes["e"]["configMap"]["name"] == "cm"  # appendIndexToConfigMapRefs not set
    assert volumes["f"]["secret"]["secretName"] == "s-4"
    # Without nameGeneration, references keep their names.
    plain = indexed_vm_spec({**spec, "nameGeneration": {}}, 4)
    assert plain["template"]["spec"]["volumes"][3]["cloudInitNoCloud"] == {
        "userDataSecretRef": {"name": "ud"}
    }
    assert spec["virtualMachineTemplate"]["spec"]["dataVolumeTemplates"][0]["metadata"] == {
        "name": "root"
    }


@pytest.mark.parametrize(
    ("replicas", "value", "count"),
    [(10, None, 10), (10, "25%", 2), (3, "10%", 1), (5, 2, 2), (5, 0, 1)],
)
def test_max_unavailable_as_upstream(replicas: int, value: Any, count: int) -> None:
    spec: dict[str, Any] = {"replicas": replicas}
    if value is not None:
        spec["maxUnavailable"] = value
    assert max_unavailable(spec) == count


async def test_a_vm_that_leaves_the_selector_is_released_and_replaced() -> None:
    rig = Rig()
    rig.api.put("virtualmachinepools", pool_body(3))
    await rig.settle()
    vm = rig.vm("web-1")
    vm["metadata"]["labels"]["pool"] = "elsewhere"
    rig.api.put("virtualmachines", vm)
    await rig.settle()
    released = rig.vm("web-1")
    assert released["metadata"]["ownerReferences"] == []
    assert released["metadata"]["finalizers"] == []
    pool_vms = [
        v["metadata"]["name"]
        for v in rig.api.caches["virtualmachines"].store.objects()
        if v["metadata"]["ownerReferences"]
    ]
    assert sorted(pool_vms) == ["web-0", "web-2", "web-3"]
    assert rig.pool()["status"]["replicas"] == 3


def failing(rig: Rig, name: str, **status: Any) -> str:
    vm = rig.vm(name)
    vm["status"] = status
    rig.api.put("virtualmachines", vm)
    return str(vm["metadata"]["uid"])


async def test_autohealing_replaces_a_vm_that_keeps_failing_to_start() -> None:
    rig = Rig()
    rig.api.put("virtualmachinepools", pool_body(2, autohealing={}))
    await rig.settle()
    old = failing(rig, "web-1", startFailure={"consecutiveFailCount": 3})
    healthy = failing(rig, "web-0", startFailure={"consecutiveFailCount": 2})
    await rig.settle()
    assert rig.vm_names() == ["web-0", "web-1"]
    replaced, kept = rig.vm("web-1"), rig.vm("web-0")
    assert replaced["metadata"]["uid"] != old
    assert kept["metadata"]["uid"] == healthy


async def test_autohealing_waits_min_failing_to_start_duration() -> None:
    rig = Rig()
    spec = {"startUpFailureThreshold": 5, "minFailingToStartDuration": "10m"}
    rig.api.put("virtualmachinepools", pool_body(1, autohealing=spec))
    await rig.settle()

    def crashing(minutes: int) -> str:
        since = (NOW - dt.timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%SZ")
        ready = {"type": "Ready", "status": "False", "lastTransitionTime": since}
        return failing(rig, "web-0", printableStatus="CrashLoopBackOff", conditions=[ready])

    first = crashing(9)
    await rig.settle()
    vm = rig.vm("web-0")
    assert vm["metadata"]["uid"] == first  # not yet: 9 of 10 minutes
    crashing(11)
    await rig.settle()
    vm = rig.vm("web-0")
    assert vm["metadata"]["uid"] != first


async def test_without_autohealing_failing_vms_stay() -> None:
    rig = Rig()
    rig.api.put("virtualmachinepools", pool_body(1))
    await rig.settle()
    old = failing(rig, "web-0", startFailure={"consecutiveFailCount": 9})
    await rig.settle()
    vm = rig.vm("web-0")
    assert vm["metadata"]["uid"] == old


@pytest.mark.parametrize(
    ("text", "seconds"), [("5m0s", 300), ("1h30m", 5400), ("90s", 90), ("1.5s", 1.5), ("0", 0)]
)
def test_go_durations(text: str, seconds: float) -> None:
    assert go_duration(text).total_seconds() == seconds


def test_a_bad_duration_is_refused() -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        go_duration("five minutes")


async def test_a_bad_autohealing_duration_is_a_replica_failure() -> None:
    rig = Rig()
    rig.api.put(
        "virtualmachinepools", pool_body(1, autohealing={"minFailingToStartDuration": "soon"})
    )
    await rig.settle()
    since = NOW.strftime("%Y-%m-%dT%H:%M:%SZ")
    ready = {"type": "Ready", "status": "False", "lastTransitionTime": since}
    failing(rig, "web-0", printableStatus="CrashLoopBackOff", conditions=[ready])
    with pytest.raises(Exception, match="invalid duration"):
        await rig.ctl.reconcile("ns/web")
    (problem,) = rig.pool()["status"]["conditions"]
    assert (problem["type"], problem["reason"]) == ("ReplicaFailure", "FailedScaleIn")


async def test_state_preservation_keeps_a_scaled_in_vms_claims_for_its_successor() -> None:
    rig = Rig()
    template = pool_body(2)["spec"]["virtualMachineTemplate"]
    template["spec"]["dataVolumeTemplates"] = [{"metadata": {"name": "root"}, "spec": {}}]
    template["spec"]["template"]["spec"]["volumes"] = [
        {"name": "r", "dataVolume": {"name": "root"}}
    ]
    policy = {"sortPolicy": "DescendingOrder"}
    preserve = {"proactive": {"selectionPolicy": policy, "statePreservation": "Offline"}}
    rig.api.put(
        "virtualmachinepools",
        pool_body(2, virtualMachineTemplate=template, scaleInStrategy=preserve),
    )
    await rig.settle()
    for index in (0, 1):
        vm = rig.vm(f"web-{index}")
        owner = {"kind": "VirtualMachine", "uid": vm["metadata"]["uid"], "controller": True}
        for plural in ("persistentvolumeclaims", "datavolumes"):
            rig.api.put(
                plural,
                {
                    "metadata": {
                        "name": f"root-{index}",
                        "namespace": "ns",
                        "ownerReferences": [owner],
                    }
                },
            )
    rig.set_pool(replicas=1)
    await rig.settle()
    assert rig.vm_names(live_only=False) == ["web-0"]
    for plural in ("persistentvolumeclaims", "datavolumes"):
        assert rig.api.obj(plural, "root-1")["metadata"]["ownerReferences"] == []
        assert len(rig.api.obj(plural, "root-0")["metadata"]["ownerReferences"]) == 1
    rig.set_pool(replicas=2)
    await rig.settle()
    reborn = rig.vm("web-1")
    assert reborn["spec"]["dataVolumeTemplates"][0]["metadata"]["name"] == "root-1"


async def test_without_state_preservation_the_claims_stay_the_vms() -> None:
    rig = Rig()
    policy = {"proactive": {"selectionPolicy": {"sortPolicy": "DescendingOrder"}}}
    rig.api.put("virtualmachinepools", pool_body(2, scaleInStrategy=policy))
    await rig.settle()
    vm = rig.vm("web-1")
    owner = {"kind": "VirtualMachine", "uid": vm["metadata"]["uid"], "controller": True}
    vm["spec"]["template"]["spec"]["volumes"] = [
        {"name": "d", "persistentVolumeClaim": {"claimName": "data-1"}}
    ]
    rig.api.put("virtualmachines", vm)
    claim = {"metadata": {"name": "data-1", "namespace": "ns", "ownerReferences": [owner]}}
    rig.api.put("persistentvolumeclaims", claim)
    rig.set_pool(replicas=1)
    await rig.settle()
    assert rig.api.obj("persistentvolumeclaims", "data-1")["metadata"]["ownerReferences"] == [owner]
