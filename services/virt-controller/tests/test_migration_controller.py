"""The migration controller against in-memory caches, a fake API and an injected clock:
the phase walk from the handlers' state, hand-off, cancel before and after it, pending
timeouts, the parallel limits and the finalizer."""

from __future__ import annotations

import copy
import datetime as dt
import itertools
from typing import Any, cast

from kube_runtime import ApiError, EventRecorder, KubeClient, ManualClock, RawObject, WorkQueue
from kube_runtime.fakes import FakeListWatch
from kube_runtime.informers import DeltaType, Event, SharedInformer
from kubevirt_api import ClusterConfig
from service_kit import MetricsRegistry
from virt_controller.config import ControllerConfig
from virt_controller.metrics import ControllerMetrics
from virt_controller.migration import MigrationController
from virt_controller.objects import index_by_controller
from virt_controller.vmi import OWNER_INDEX, current_pod

NOW = dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=dt.UTC)
STAMP = "2026-01-01T12:00:00Z"


class FakeApi:
    """Answers as the API server would and records the writes."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Any]] = []
        self.ids = itertools.count(1)
        self.namespaces: dict[str, dict[str, Any]] = {}

    async def get(self, resource: Any, name: str, namespace: str | None = None) -> Any:
        if resource.plural == "namespaces" and name in self.namespaces:
            return self.namespaces[name]
        raise ApiError(404, "NotFound", f"{name} not found")

    async def create(
        self, resource: Any, body: Any, namespace: str | None = None, **kw: Any
    ) -> Any:
        obj = copy.deepcopy(body)
        obj["metadata"]["uid"] = f"uid-{next(self.ids)}"
        obj["metadata"].setdefault("name", obj["metadata"].get("generateName", "") + "x")
        self.calls.append(("create", resource.plural, obj))
        return obj

    async def delete(
        self, resource: Any, name: str, namespace: str | None = None, **kw: Any
    ) -> Any:
        self.calls.append(("delete", resource.plural, name))
        return {}

    async def json_patch(
        self, resource: Any, name: str, ops: Any, namespace: Any = None, **kw: Any
    ) -> Any:
        self.calls.append(("json_patch", resource.plural, ops))
        return {}

    async def merge_patch(
        self, resource: Any, name: str, patch: Any, namespace: Any = None, **kw: Any
    ) -> Any:
        self.calls.append(("merge_patch", resource.plural, patch))
        return {}

    async def patch_status(
        self, resource: Any, name: str, status: Any, namespace: Any = None, **kw: Any
    ) -> Any:
        self.calls.append(("patch_status", resource.plural, status))
        return {}

    def writes(self, verb: str, plural: str) -> list[Any]:
        return [body for v, p, body in self.calls if v == verb and p == plural]

    def events(self) -> list[tuple[str, str]]:
        return [(b["reason"], b["message"]) for b in self.writes("create", "events")]


def informer(name: str, **indexers: Any) -> SharedInformer[RawObject]:
    return SharedInformer(FakeListWatch(), name=name, indexers=indexers or None)


def vmi(**status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstance",
        "metadata": {"name": "guest", "namespace": "ns", "uid": "vmi-uid", "labels": {"app": "db"}},
        "spec": {"domain": {"devices": {}, "resources": {"requests": {"memory": "64Mi"}}}},
        "status": {"phase": "Running", "nodeName": "node-a", **status},
    }


def migration(
    phase: str = "", name: str = "move", uid: str = "mig-uid", **meta: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstanceMigration",
        "metadata": {"name": name, "namespace": "ns", "uid": uid,
                     "finalizers": ["kubevirt.io/migrationJobFinalize"], **meta},
        "spec": {"vmiName": "guest"},
        "status": {"phase": phase} if phase else {},
    }  # fmt: skip


def pod(name: str, node: str, *, job: str | None = None, phase: str = "Running",
        created: str = STAMP, ready: bool = True, **status: Any) -> dict[str, Any]:  # fmt: skip
    labels = {"kubevirt.io": "virt-launcher", "kubevirt.io/created-by": "vmi-uid"}
    if job:
        labels["kubevirt.io/migrationJobUID"] = job
    compute = {"name": "compute", "state": {"running": {}} if ready else {"waiting": {}}}
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"{name}-uid",
            "labels": labels,
            "creationTimestamp": created,
            "ownerReferences": [
                {
                    "kind": "VirtualMachineInstance",
                    "uid": "vmi-uid",
                    "controller": True,
                    "name": "guest",
                }
            ],
        },
        "spec": {"nodeName": node},
        "status": {"phase": phase, "containerStatuses": [compute], **status},
    }


class Setup:
    def __init__(self, kubevirt: dict[str, Any] | None = None) -> None:
        self.api = FakeApi()
        self.clock = ManualClock()
        self.now = NOW
        self.migrations = informer("migrations")
        self.vmis = informer("vmis")
        self.pods = informer("pods", **{OWNER_INDEX: index_by_controller("VirtualMachineInstance")})
        self.policies = informer("policies")
        self.queue: WorkQueue[str] = WorkQueue("t", clock=self.clock)
        self.registry = MetricsRegistry()
        config = ControllerConfig(cluster=ClusterConfig.from_kubevirt(kubevirt))
        self.ctl = MigrationController(
            cast(KubeClient, self.api),
            self.migrations,
            self.vmis,
            self.pods,
            self.queue,
            lambda: config,
            policies=self.policies,
            metrics=ControllerMetrics(self.registry),
            recorder=EventRecorder(cast(KubeClient, self.api), "virt-controller", clock=self.clock),
            now=lambda: self.now,
        )

    def add_pod(self, obj: dict[str, Any]) -> None:
        """A pod as the informer delivers it (the controller observes its own creations)."""
        delta = self.pods.store.upsert(obj)
        self.ctl.on_pod(Event(DeltaType.ADDED, delta.key, delta.obj, None, False, self.pods.decode))

    async def step(self, mig: dict[str, Any]) -> list[Any]:
        """Reconcile `mig` as the cache holds it; the status patches written."""
        self.migrations.store.upsert(mig)
        before = len(self.api.writes("patch_status", "virtualmachineinstancemigrations"))
        await self.ctl.reconcile("ns/" + mig["metadata"]["name"])
        return self.api.writes("patch_status", "virtualmachineinstancemigrations")[before:]


def phases(patches: list[Any]) -> list[str]:
    return [p["phase"] for p in patches if "phase" in p]


async def test_the_phase_walk_follows_the_handlers_state_to_succeeded() -> None:
    s = Setup()
    s.vmis.store.upsert(vmi())
    s.pods.store.upsert(pod("source", "node-a"))
    assert phases(await s.step(migration())) == ["Pending"]
    # Pending: the target pod is created, off the source node, labelled with the job.
    patches = await s.step(migration("Pending"))
    (created,) = s.api.writes("create", "pods")
    assert created["metadata"]["labels"]["kubevirt.io/migrationJobUID"] == "mig-uid"
    anti = created["spec"]["affinity"]["podAntiAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert anti[0]["labelSelector"]["matchLabels"] == {"kubevirt.io/created-by": "vmi-uid"}
    assert patches[0]["migrationState"] == {"sourcePod": "source"}
    s.add_pod(pod("target", "node-b", job="mig-uid", ready=False, phase="Pending"))
    assert phases(await s.step(migration("Pending"))) == ["Scheduling"]
    # A bound but not running pod keeps it Scheduling; ready makes it Scheduled.
    assert phases(await s.step(migration("Scheduling"))) == []
    s.pods.store.upsert(pod("target", "node-b", job="mig-uid"))
    assert phases(await s.step(migration("Scheduling"))) == ["Scheduled"]
    # Scheduled with a ready target: hand-off writes the VMI's state and target label.
    mig = migration("Scheduled")
    mig["status"]["migrationState"] = {"sourcePod": "source"}
    await s.step(mig)
    ops = s.api.writes("json_patch", "virtualmachineinstances")[-1]
    state = next(o["value"] for o in ops if o["path"] == "/status/migrationState")
    assert state["migrationUid"] == "mig-uid"
    assert (state["sourceNode"], state["targetNode"]) == ("node-a", "node-b")
    assert (state["sourcePod"], state["targetPod"]) == ("source", "target")
    assert state["migrationConfiguration"]["completionTimeoutPerGiB"] == 150
    assert "migrationPolicyName" not in state
    assert {"op": "add", "path": "/metadata/labels/kubevirt.io~1migrationTargetNodeName",
            "value": "node-b"} in ops  # fmt: skip
    assert (
        "SuccessfulHandOver",
        "Migration target pod is ready for preparation by virt-handler.",
    ) in s.api.events()
    # The handlers' part, step by step.
    s.vmis.store.upsert(vmi(migrationState=state))
    assert phases(await s.step(migration("Scheduled"))) == ["PreparingTarget"]
    assert phases(await s.step(migration("PreparingTarget"))) == []
    s.vmis.store.upsert(vmi(migrationState={**state, "targetNodeAddress": "10.0.0.2"}))
    assert phases(await s.step(migration("PreparingTarget"))) == ["TargetReady"]
    s.vmis.store.upsert(
        vmi(migrationState={**state, "targetNodeAddress": "10.0.0.2", "startTimestamp": STAMP})
    )
    assert phases(await s.step(migration("TargetReady"))) == ["Running"]
    done = {
        **state,
        "targetNodeAddress": "10.0.0.2",
        "startTimestamp": STAMP,
        "endTimestamp": STAMP,
        "completed": True,
    }
    s.vmis.store.upsert(vmi(migrationState=done, nodeName="node-b"))
    patches = await s.step(migration("Running"))
    assert phases(patches) == ["Succeeded"]
    assert patches[0]["phaseTransitionTimestamps"][-1] == {
        "phase": "Succeeded",
        "phaseTransitionTimestamp": STAMP,
    }
    assert ("SuccessfulMigration", "Source node reported migration succeeded") in s.api.events()
    # Final: the VMI's state is copied into the job and the finalizer goes.
    patches = await s.step(migration("Succeeded"))
    assert patches[0]["migrationState"] == done
    finalizer_ops = s.api.writes("json_patch", "virtualmachineinstancemigrations")[-1]
    assert finalizer_ops[-1] == {"op": "replace", "path": "/metadata/finalizers", "value": []}


async def test_hand_off_records_the_matched_policy_and_its_overrides() -> None:
    s = Setup()
    s.api.namespaces["ns"] = {"metadata": {"name": "ns", "labels": {"team": "a"}}}
    s.policies.store.upsert(
        {
            "apiVersion": "migrations.kubevirt.io/v1alpha1",
            "kind": "MigrationPolicy",
            "metadata": {"name": "slow-db"},
            "spec": {
                "selectors": {"virtualMachineInstanceSelector": {"app": "db"}, "namespaceSelector": {"team": "a"}},
                "bandwidthPerMigration": "1Mi",
                "completionTimeoutPerGiB": 5,
            },
        }
    )  # fmt: skip
    s.vmis.store.upsert(vmi())
    s.pods.store.upsert(pod("source", "node-a"))
    s.pods.store.upsert(pod("target", "node-b", job="mig-uid"))
    await s.step(migration("Scheduled"))
    ops = s.api.writes("json_patch", "virtualmachineinstances")[-1]
    state = next(o["value"] for o in ops if o["path"] == "/status/migrationState")
    assert state["migrationPolicyName"] == "slow-db"
    assert state["migrationConfiguration"]["bandwidthPerMigration"] == "1Mi"
    assert state["migrationConfiguration"]["completionTimeoutPerGiB"] == 5
    assert state["migrationConfiguration"]["progressTimeout"] == 150


async def test_a_cancel_before_hand_off_fails_it_and_deletes_the_target_pod() -> None:
    s = Setup()
    s.vmis.store.upsert(vmi())
    s.pods.store.upsert(pod("source", "node-a"))
    s.pods.store.upsert(pod("target", "node-b", job="mig-uid", ready=False, phase="Pending"))
    patches = await s.step(migration("Scheduling", deletionTimestamp=STAMP))
    assert s.api.writes("delete", "pods") == ["target"]
    assert phases(patches) == ["Failed"]
    (cond,) = patches[0]["conditions"]
    assert (cond["type"], cond["status"]) == ("migrationAbortRequested", "True")
    assert ("FailedMigration", "Migration failed due to being canceled") in s.api.events()
    # Final and deleted: the finalizer is released (the object can go).
    await s.step(migration("Failed", deletionTimestamp=STAMP))
    assert s.api.writes("json_patch", "virtualmachineinstancemigrations")


async def test_a_cancel_after_hand_off_asks_the_handlers_and_keeps_the_finalizer() -> None:
    s = Setup()
    state = {"migrationUid": "mig-uid", "targetNode": "node-b", "targetNodeAddress": "10.0.0.2",
             "startTimestamp": STAMP}  # fmt: skip
    s.vmis.store.upsert(vmi(migrationState=state))
    s.pods.store.upsert(pod("source", "node-a"))
    s.pods.store.upsert(pod("target", "node-b", job="mig-uid"))
    patches = await s.step(migration("Running", deletionTimestamp=STAMP))
    assert phases(patches) == []
    assert patches[0]["conditions"][0]["type"] == "migrationAbortRequested"
    ops = s.api.writes("json_patch", "virtualmachineinstances")[-1]
    assert {"op": "add", "path": "/status/migrationState/abortRequested", "value": True} in ops
    assert {"op": "test", "path": "/status/migrationState/migrationUid", "value": "mig-uid"} in ops
    assert s.api.writes("json_patch", "virtualmachineinstancemigrations") == []  # finalizer kept
    # The source handler aborted: failed; the migration fails, then lets go.
    aborted = {**state, "abortRequested": True, "abortStatus": "Succeeded", "failed": True,
               "failureReason": "Live migration has been aborted"}  # fmt: skip
    s.vmis.store.upsert(vmi(migrationState=aborted))
    cancelled = migration("Running", deletionTimestamp=STAMP)
    cancelled["status"]["conditions"] = [{"type": "migrationAbortRequested", "status": "True"}]
    assert phases(await s.step(cancelled)) == ["Failed"]
    patches = await s.step(migration("Failed", deletionTimestamp=STAMP))
    assert patches[0]["migrationState"]["abortStatus"] == "Succeeded"
    assert s.api.writes("json_patch", "virtualmachineinstancemigrations")
    # The target pod has nothing left to do on the target node.
    assert "target" in s.api.writes("delete", "pods")


async def test_a_target_pod_pending_too_long_is_deleted_and_the_migration_fails() -> None:
    s = Setup()
    s.vmis.store.upsert(vmi())
    s.pods.store.upsert(pod("source", "node-a"))
    unschedulable = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]
    stuck = pod("target", "", job="mig-uid", phase="Pending", ready=False, conditions=unschedulable)
    s.pods.store.upsert(stuck)
    s.now = NOW + dt.timedelta(seconds=299)
    await s.step(migration("Scheduling"))
    assert s.api.writes("delete", "pods") == []
    assert s.queue.delayed >= 1  # looks again when the timeout would be reached
    s.now = NOW + dt.timedelta(seconds=300)
    await s.step(migration("Scheduling"))
    assert s.api.writes("delete", "pods") == ["target"]
    assert (
        "SuccessfulDelete",
        "unschedulable pod ns/target timeout period exceeded",
    ) in s.api.events()
    s.pods.store.delete(stuck)
    assert phases(await s.step(migration("Scheduling"))) == ["Failed"]
    assert (
        "FailedMigration",
        "Migration target pod was removed during active migration.",
    ) in s.api.events()


async def test_the_catch_all_pending_timeout_can_be_shortened_per_migration() -> None:
    s = Setup()
    s.vmis.store.upsert(vmi())
    s.pods.store.upsert(pod("source", "node-a"))
    s.pods.store.upsert(pod("target", "node-b", job="mig-uid", phase="Pending", ready=False))
    s.now = NOW + dt.timedelta(seconds=5)
    await s.step(
        migration("Scheduling", annotations={"kubevirt.io/migrationPendingPodTimeoutSeconds": "5"})
    )
    assert s.api.writes("delete", "pods") == ["target"]
    assert ("SuccessfulDelete", "pending pod ns/target timeout period exceeded") in s.api.events()


async def test_the_target_pod_ending_fails_the_migration_and_the_vmi_state() -> None:
    s = Setup()
    state = {"migrationUid": "mig-uid", "targetNode": "node-b"}
    s.vmis.store.upsert(vmi(migrationState=state))
    s.pods.store.upsert(pod("source", "node-a"))
    s.pods.store.upsert(pod("target", "node-b", job="mig-uid", phase="Failed"))
    assert phases(await s.step(migration("PreparingTarget"))) == ["Failed"]
    ops = s.api.writes("json_patch", "virtualmachineinstances")[-1]
    assert {
        "op": "add",
        "path": "/status/migrationState/failureReason",
        "value": "Target pod is down",
    } in ops
    assert (
        "FailedMigration",
        "Migration failed because target pod shutdown during migration",
    ) in s.api.events()


async def test_the_cluster_limit_holds_new_migrations_pending() -> None:
    s = Setup({"spec": {"configuration": {"migrations": {"parallelMigrationsPerCluster": 1}}}})
    s.vmis.store.upsert(vmi())
    s.pods.store.upsert(pod("source", "node-a"))
    s.migrations.store.upsert(migration("Running", name="other", uid="other-uid"))
    await s.step(migration("Pending"))
    assert s.api.writes("create", "pods") == []
    assert s.queue.delayed == 1


async def test_the_outbound_limit_counts_migrations_leaving_the_source_node() -> None:
    s = Setup({"spec": {"configuration": {"migrations": {"parallelOutboundMigrationsPerNode": 1}}}})
    s.vmis.store.upsert(vmi())
    s.pods.store.upsert(pod("source", "node-a"))
    s.migrations.store.upsert(migration("Running", name="other", uid="other-uid"))
    await s.step(migration("Pending"))
    assert s.api.writes("create", "pods") == []
    s2 = Setup()
    s2.vmis.store.upsert(vmi())
    s2.pods.store.upsert(pod("source", "node-a"))
    s2.migrations.store.upsert(migration("Running", name="other", uid="other-uid"))
    await s2.step(migration("Pending"))
    assert len(s2.api.writes("create", "pods")) == 1


async def test_a_second_migration_of_a_migrating_vmi_fails() -> None:
    s = Setup()
    s.vmis.store.upsert(vmi(migrationState={"migrationUid": "first-uid", "targetNode": "node-b"}))
    s.migrations.store.upsert(migration("Running", name="first", uid="first-uid"))
    patches = await s.step(migration(name="second", uid="second-uid"))
    assert phases(patches) == ["Failed"]
    assert (
        "FailedMigration",
        "VMI is not eligible for migration because another migration job is in progress.",
    ) in s.api.events()


async def test_the_migration_gauges_count_phases_and_outcomes() -> None:
    s = Setup()
    for name, phase in (
        ("a", "Pending"),
        ("b", "Scheduling"),
        ("c", "TargetReady"),
        ("d", "Succeeded"),
        ("e", ""),
    ):
        s.migrations.store.upsert(migration(phase, name=name, uid=f"{name}-uid"))
    assert s.ctl.metrics is not None
    s.ctl.metrics.count_migrations(s.migrations.store.objects())
    text = s.registry.render()[0].decode()
    assert "kubevirt_vmi_migrations_in_pending_phase 1" in text
    assert "kubevirt_vmi_migrations_in_scheduling_phase 1" in text
    assert "kubevirt_vmi_migrations_in_running_phase 1" in text
    assert "kubevirt_vmi_migrations_in_unset_phase 1" in text
    assert "kubevirt_vmi_migration_succeeded{" in text
    assert 'vmim="d"' in text


def test_after_the_move_the_vmis_pod_is_the_target_one() -> None:
    source = pod("source", "node-a", phase="Succeeded")
    target = pod("target", "node-b", job="mig-uid", created="2026-01-01T12:05:00Z")
    assert current_pod(vmi(nodeName="node-b"), [source, target]) is target
    assert current_pod(vmi(), [source, target]) is source  # still on the source node


async def test_a_failed_evacuation_backs_off_before_the_next_target_pod() -> None:
    s = Setup()
    s.vmis.store.upsert(vmi())
    s.pods.store.upsert(pod("source", "node-a"))
    evacuation = {"kubevirt.io/evacuationMigration": "node-a"}
    failed = migration("Failed", name="first", uid="first-uid", annotations=evacuation)
    failed["metadata"]["creationTimestamp"] = "2026-01-01T11:00:00Z"
    failed["status"]["phaseTransitionTimestamps"] = [
        {"phase": "Failed", "phaseTransitionTimestamp": STAMP}
    ]
    s.migrations.store.upsert(failed)
    retry = migration("Pending", name="second", uid="second-uid", annotations=evacuation)
    retry["metadata"]["creationTimestamp"] = "2026-01-01T12:00:01Z"
    s.now = NOW + dt.timedelta(seconds=10)
    await s.step(retry)
    assert s.api.writes("create", "pods") == []
    assert ("MigrationBackoff", "backoff migrating vmi ns/guest") in s.api.events()
    s.now = NOW + dt.timedelta(seconds=20)
    await s.step(retry)
    assert len(s.api.writes("create", "pods")) == 1
