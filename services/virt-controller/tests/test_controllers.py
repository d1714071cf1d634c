"""The VMI and VM controllers' reconcile against in-memory caches and a recording client:
expectations prevent duplicate pods, owner references (not labels) decide ownership, and
state change requests are consumed with a guarded patch; upstream's Events, conditions and
reasons ride along."""

from __future__ import annotations

import datetime as dt
import itertools
from typing import Any, cast

import pytest
from kube_runtime import (
    ApiError,
    EventRecorder,
    KubeClient,
    ManualClock,
    RawObject,
    SharedInformer,
    WorkQueue,
)
from kube_runtime.fakes import FakeListWatch
from kube_runtime.informers import DeltaType, Event
from service_kit import MetricsRegistry
from virt_controller.config import ControllerConfig
from virt_controller.metrics import ControllerMetrics
from virt_controller.objects import index_by_controller
from virt_controller.vm import VmController
from virt_controller.vmi import (
    OWNER_INDEX,
    SCHEDULING_GRACE,
    PodCreationBlockedError,
    VmiController,
)

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


class RecordingClient:
    """Records writes; creations get a uid and a name as the API server would give."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Any]] = []
        self._ids = itertools.count(1)
        #: Objects a GET finds, by path; other GETs answer 404 NotFound.
        self.objects: dict[str, Any] = {}
        #: Paths the API server does not serve at all (404 on any request).
        self.unserved: set[str] = set()

    async def get(self, resource: Any, name: str, namespace: str | None = None) -> Any:
        path = resource.path(namespace, name)
        self.calls.append(("get", path, None))
        if path not in self.objects:
            raise ApiError(404, "NotFound", f"{name} not found")
        return self.objects[path]

    async def create(
        self, resource: Any, body: dict[str, Any], namespace: str | None = None
    ) -> Any:
        obj = {**body, "metadata": {**body["metadata"], "uid": f"uid-{next(self._ids)}"}}
        if "generateName" in obj["metadata"]:
            obj["metadata"]["name"] = obj["metadata"]["generateName"] + "x"
        self.calls.append(("create", resource.plural, obj))
        return obj

    async def delete(
        self, resource: Any, name: str, namespace: str | None = None, **kw: Any
    ) -> Any:
        self.calls.append(("delete", resource.plural, {"name": name, **kw}))
        return {}

    async def merge_patch(
        self, resource: Any, name: str, patch: Any, namespace: Any = None, **kw: Any
    ) -> Any:
        self.calls.append(("merge_patch", resource.plural, patch))
        return {}

    async def json_patch(
        self, resource: Any, name: str, ops: Any, namespace: Any = None, **kw: Any
    ) -> Any:
        self.calls.append(
            (
                "json_patch",
                resource.plural + ("/" + kw["subresource"] if kw.get("subresource") else ""),
                ops,
            )
        )
        return {}

    async def request(self, method: str, path: str, **kw: Any) -> Any:
        self.calls.append(("request", path, kw.get("body")))
        if path in self.unserved:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return {}

    def writes(self, verb: str, resource: str) -> list[Any]:
        return [body for v, r, body in self.calls if v == verb and r == resource]


def informer(name: str, **indexers: Any) -> SharedInformer[RawObject]:
    return SharedInformer(FakeListWatch(), name=name, indexers=indexers or None)


def added(inf: SharedInformer[RawObject], obj: dict[str, Any]) -> Event[RawObject]:
    delta = inf.store.upsert(obj)
    return Event(DeltaType.ADDED, delta.key, delta.obj, None, False, inf.decode)


def vmi_obj(**status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstance",
        "metadata": {"name": "a", "namespace": "ns", "uid": "vmi-uid", "resourceVersion": "1"},
        "spec": {"domain": {"devices": {}, "resources": {"requests": {"memory": "64Mi"}}}},
        "status": status,
    }


def vmi_setup(
    client: RecordingClient | None = None,
    claims: SharedInformer[RawObject] | None = None,
) -> tuple[VmiController, RecordingClient, SharedInformer[RawObject], SharedInformer[RawObject]]:
    client = client or RecordingClient()
    vmis = informer("vmis", **{OWNER_INDEX: index_by_controller(None)})
    pods = informer("pods", **{OWNER_INDEX: index_by_controller("VirtualMachineInstance")})
    queue: WorkQueue[str] = WorkQueue("t", clock=ManualClock())
    ctl = VmiController(
        cast(KubeClient, client),
        vmis,
        pods,
        queue,
        ControllerConfig,
        ControllerMetrics(MetricsRegistry()),
        recorder=EventRecorder(cast(KubeClient, client), "virt-controller", clock=ManualClock()),
        now=lambda: NOW,
        claims=claims,
    )
    return ctl, client, vmis, pods


async def test_no_second_pod_while_the_first_is_not_yet_seen() -> None:
    ctl, client, vmis, pods = vmi_setup()
    vmis.store.upsert(vmi_obj())
    await ctl.reconcile("ns/a")
    await ctl.reconcile("ns/a")  # the watch has not shown the pod yet
    created = client.writes("create", "pods")
    assert len(created) == 1
    ctl.on_pod(added(pods, created[0]))
    await ctl.reconcile("ns/a")
    assert len(client.writes("create", "pods")) == 1


async def test_a_labelled_pod_without_owner_reference_is_not_the_vmis() -> None:
    ctl, client, vmis, pods = vmi_setup()
    vmis.store.upsert(vmi_obj(phase="Pending"))
    impostor = {
        "metadata": {
            "name": "impostor",
            "namespace": "ns",
            "uid": "p0",
            "labels": {"kubevirt.io": "virt-launcher", "kubevirt.io/created-by": "vmi-uid"},
        },
        "spec": {"nodeName": "n1"},
        "status": {"phase": "Running"},
    }
    ctl.on_pod(added(pods, impostor))
    await ctl.reconcile("ns/a")
    assert len(client.writes("create", "pods")) == 1
    (patch,) = client.writes("merge_patch", "virtualmachineinstances")
    status = patch.get("status", {})
    assert "p0" not in (status.get("activePods") or {})
    assert "nodeName" not in status
    assert status.get("phase", "Pending") == "Pending"


async def _pod_bound_to_n1(pod_status: dict[str, Any] | None = None) -> tuple[Any, Any]:
    """A Pending VMI's controller after it created the pod and the scheduler bound it."""
    ctl, client, vmis, pods = vmi_setup()
    vmis.store.upsert(vmi_obj(phase="Pending"))
    await ctl.reconcile("ns/a")
    pod = dict(client.writes("create", "pods")[0])
    pod["spec"] = {**pod["spec"], "nodeName": "n1"}
    if pod_status is not None:
        pod["status"] = pod_status
    pods.store.upsert(pod)
    return ctl, client


async def test_bound_pod_makes_the_vmi_scheduled_with_node_label() -> None:
    ctl, client = await _pod_bound_to_n1()
    client.calls.clear()
    await ctl.reconcile("ns/a")
    (patch,) = client.writes("merge_patch", "virtualmachineinstances")
    assert patch["status"]["phase"] == "Scheduled"
    assert patch["status"]["nodeName"] == "n1"
    assert patch["metadata"]["labels"] == {"kubevirt.io/nodeName": "n1"}
    assert patch["metadata"]["resourceVersion"] == "1"
    assert [s["phase"] for s in patch["status"]["phaseTransitionTimestamps"]] == [
        "Scheduling",
        "Scheduled",
    ]
    # The readiness gate waits for the kubelet: nothing to be ready yet.
    assert client.writes("request", "/api/v1/namespaces/ns/pods/virt-launcher-a-x/status") == []


async def test_the_readiness_gate_is_written_once_the_kubelet_has_the_pod() -> None:
    ctl, client = await _pod_bound_to_n1({"phase": "Pending", "startTime": "2026-12-06T00:00:00Z"})
    await ctl.reconcile("ns/a")
    (gate,) = client.writes("request", "/api/v1/namespaces/ns/pods/virt-launcher-a-x/status")
    assert gate["status"]["conditions"][0]["type"] == "kubevirt.io/virtual-machine-unpaused"
    assert gate["status"]["conditions"][0]["status"] == "True"


class VersioningClient(RecordingClient):
    """Answers each VMI or pod patch with a new resourceVersion, as the API server does."""

    def __init__(self) -> None:
        super().__init__()
        self._versions = itertools.count(100)

    async def merge_patch(
        self, resource: Any, name: str, patch: Any, namespace: Any = None, **kw: Any
    ) -> Any:
        await super().merge_patch(resource, name, patch, namespace, **kw)
        return {"metadata": {"name": name, "resourceVersion": str(next(self._versions))}}

    async def request(self, method: str, path: str, **kw: Any) -> Any:
        await super().request(method, path, **kw)
        return {"metadata": {"resourceVersion": str(next(self._versions))}}


async def test_a_pass_before_the_watch_shows_our_write_writes_nothing() -> None:
    ctl, client, vmis, pods = vmi_setup(VersioningClient())
    vmis.store.upsert(admitted_vmi_obj())
    await ctl.reconcile("ns/a")  # the pod: no VMI write
    pod = dict(client.writes("create", "pods")[0])
    pods.store.upsert({**pod, "spec": {**pod["spec"], "nodeName": "n1"}})
    client.calls.clear()
    await ctl.reconcile("ns/a")
    assert len(client.writes("merge_patch", "virtualmachineinstances")) == 1
    # A pod event wakes the VMI while its cached copy is still the one we patched: a
    # write guarded by that version would be refused (409), so none is made.
    client.calls.clear()
    await ctl.reconcile("ns/a")
    assert client.calls == []
    # Another writer's version is worked on again.
    other = admitted_vmi_obj()
    other["metadata"]["resourceVersion"] = "50"
    vmis.store.upsert(other)
    await ctl.reconcile("ns/a")
    assert len(client.writes("merge_patch", "virtualmachineinstances")) == 1


def admitted_vmi_obj() -> dict[str, Any]:
    """A VMI as virt-api admits it: Pending, with the VMI controller's finalizer."""
    vmi = vmi_obj(
        phase="Pending",
        phaseTransitionTimestamps=[{"phase": "Pending", "phaseTransitionTimestamp": "t0"}],
    )
    vmi["metadata"]["finalizers"] = ["foregroundDeleteVirtualMachine"]
    return vmi


async def test_an_admitted_vmi_gets_its_pod_without_a_write_of_its_own() -> None:
    ctl, client, vmis, _ = vmi_setup()
    vmis.store.upsert(admitted_vmi_obj())
    await ctl.reconcile("ns/a")
    assert len(client.writes("create", "pods")) == 1
    assert client.writes("merge_patch", "virtualmachineinstances") == []


async def test_a_pod_bound_within_the_grace_makes_one_write_pending_to_scheduled() -> None:
    ctl, client, vmis, pods = vmi_setup()
    vmis.store.upsert(admitted_vmi_obj())
    await ctl.reconcile("ns/a")
    pod = dict(client.writes("create", "pods")[0])
    ctl.on_pod(added(pods, pod))
    await ctl.reconcile("ns/a")  # seen, not bound yet: the scheduler gets its grace
    assert client.writes("merge_patch", "virtualmachineinstances") == []
    pods.store.upsert({**pod, "spec": {**pod["spec"], "nodeName": "n1"}})
    await ctl.reconcile("ns/a")
    (patch,) = client.writes("merge_patch", "virtualmachineinstances")
    assert patch["status"]["phase"] == "Scheduled"
    assert [s["phase"] for s in patch["status"]["phaseTransitionTimestamps"]] == [
        "Pending",
        "Scheduling",
        "Scheduled",
    ]
    assert "finalizers" not in patch["metadata"]  # admitted with it


async def test_a_pod_left_unbound_past_the_grace_shows_scheduling() -> None:
    ctl, client, vmis, pods = vmi_setup()
    vmis.store.upsert(admitted_vmi_obj())
    await ctl.reconcile("ns/a")
    ctl.on_pod(added(pods, dict(client.writes("create", "pods")[0])))
    await ctl.reconcile("ns/a")
    assert client.writes("merge_patch", "virtualmachineinstances") == []
    clock = cast(ManualClock, ctl.queue.clock)
    await clock.advance(SCHEDULING_GRACE)
    await ctl.reconcile("ns/a")
    (patch,) = client.writes("merge_patch", "virtualmachineinstances")
    assert patch["status"]["phase"] == "Scheduling"


async def test_a_pod_the_scheduler_refuses_shows_scheduling_at_once() -> None:
    ctl, client, vmis, pods = vmi_setup()
    vmis.store.upsert(admitted_vmi_obj())
    await ctl.reconcile("ns/a")
    pod = dict(client.writes("create", "pods")[0])
    refused = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
    ctl.on_pod(added(pods, {**pod, "status": {"phase": "Pending", "conditions": [refused]}}))
    await ctl.reconcile("ns/a")
    (patch,) = client.writes("merge_patch", "virtualmachineinstances")
    assert patch["status"]["phase"] == "Scheduling"
    (scheduled,) = [c for c in patch["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert (scheduled["status"], scheduled["reason"]) == ("False", "Unschedulable")


def multus_vmi(**status: Any) -> dict[str, Any]:
    vmi = vmi_obj(**status)
    vmi["spec"]["domain"]["devices"]["interfaces"] = [
        {"name": "default", "masquerade": {}},
        {"name": "blue", "bridge": {}},
    ]
    vmi["spec"]["networks"] = [
        {"name": "default", "pod": {}},
        {"name": "blue", "multus": {"networkName": "blue-net"}},
    ]
    return vmi


BLUE_NAD = "/apis/k8s.cni.cncf.io/v1/namespaces/ns/network-attachment-definitions/blue-net"


async def test_without_multus_the_vmi_says_so_and_gets_no_pod() -> None:
    client = RecordingClient()
    client.unserved.add("/apis/k8s.cni.cncf.io/v1")
    ctl, client, vmis, _ = vmi_setup(client)
    vmis.store.upsert(multus_vmi())
    with pytest.raises(PodCreationBlockedError):  # the controller retries it with back-off
        await ctl.reconcile("ns/a")
    assert client.writes("create", "pods") == []
    (patch,) = client.writes("merge_patch", "virtualmachineinstances")
    (synced,) = [c for c in patch["status"]["conditions"] if c["type"] == "Synchronized"]
    expected = (
        "Multus (k8s.cni.cncf.io NetworkAttachmentDefinition) is not installed in this "
        "cluster: network 'blue' (spec.networks[1].multus.networkName) cannot be attached"
    )
    assert (synced["type"], synced["status"], synced["reason"], synced["message"]) == (
        "Synchronized",
        "False",
        "FailedCreate",
        expected,
    )
    (event,) = client.writes("create", "events")
    assert (event["type"], event["reason"], event["message"]) == (
        "Warning",
        "FailedCreate",
        expected,
    )
    assert event["involvedObject"]["name"] == "a"

    # The retry sees its own condition: no second event, no status write.
    written = multus_vmi(**patch["status"])
    written["metadata"]["finalizers"] = patch["metadata"]["finalizers"]
    vmis.store.upsert(written)
    client.calls.clear()
    with pytest.raises(PodCreationBlockedError):
        await ctl.reconcile("ns/a")
    assert client.writes("create", "events") == []
    assert client.writes("merge_patch", "events") == []
    assert client.writes("merge_patch", "virtualmachineinstances") == []

    # Multus and the NAD appear: the pod is created, with its attachment, and the
    # condition goes.
    client.unserved.clear()
    client.objects[BLUE_NAD] = {"metadata": {"name": "blue-net"}}
    client.calls.clear()
    await ctl.reconcile("ns/a")
    (pod,) = client.writes("create", "pods")
    assert pod["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"] == (
        '[{"name":"blue-net","namespace":"ns","interface":"pod16477688c0e"}]'
    )
    (patch,) = client.writes("merge_patch", "virtualmachineinstances")
    assert "Synchronized" not in conditions(patch)


async def test_a_missing_nad_is_named() -> None:
    ctl, client, vmis, _ = vmi_setup()
    vmis.store.upsert(multus_vmi())
    with pytest.raises(PodCreationBlockedError, match="ns/blue-net"):
        await ctl.reconcile("ns/a")
    assert client.writes("create", "pods") == []
    (event,) = client.writes("create", "events")
    assert event["message"].startswith("failed to locate network attachment definition ns/blue-net")


async def test_a_vmi_without_multus_reads_no_nad() -> None:
    ctl, client, vmis, _ = vmi_setup()
    vmis.store.upsert(vmi_obj())
    await ctl.reconcile("ns/a")
    assert len(client.writes("create", "pods")) == 1
    assert [c for c in client.calls if c[0] == "get" or "cni" in c[1]] == []


def vm_setup(
    **status: Any,
) -> tuple[VmController, RecordingClient, SharedInformer[RawObject], dict[str, Any]]:
    client = RecordingClient()
    vms = informer("vms")
    vmis = informer("vmis", **{OWNER_INDEX: index_by_controller(None)})
    queue: WorkQueue[str] = WorkQueue("t", clock=ManualClock())
    ctl = VmController(
        cast(KubeClient, client),
        vms,
        vmis,
        queue,
        ControllerMetrics(MetricsRegistry()),
        recorder=EventRecorder(cast(KubeClient, client), "virt-controller", clock=ManualClock()),
        now=lambda: NOW,
    )
    vm = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": "a", "namespace": "ns", "uid": "vm-uid"},
        "spec": {"runStrategy": "Manual", "template": {"spec": {"domain": {"devices": {}}}}},
        "status": status,
    }
    vms.store.upsert(vm)
    return ctl, client, vmis, vm


async def test_start_request_creates_the_vmi_and_is_removed_with_a_test() -> None:
    ctl, client, _, _ = vm_setup(stateChangeRequests=[{"action": "Start"}])
    await ctl.reconcile("ns/a")
    (vmi,) = client.writes("create", "virtualmachineinstances")
    assert vmi["metadata"]["finalizers"] == ["kubevirt.io/virtualMachineControllerFinalize"]
    assert vmi["metadata"]["ownerReferences"][0]["uid"] == "vm-uid"
    (ops,) = client.writes("json_patch", "virtualmachines/status")
    assert {
        "op": "test",
        "path": "/status/stateChangeRequests",
        "value": [{"action": "Start"}],
    } in ops
    assert {"op": "remove", "path": "/status/stateChangeRequests"} in ops
    printable = [o for o in ops if o["path"] == "/status/printableStatus"]
    assert printable[0]["value"] == "Starting"


async def test_manual_without_requests_creates_nothing() -> None:
    ctl, client, _, _ = vm_setup()
    await ctl.reconcile("ns/a")
    assert not client.writes("create", "virtualmachineinstances")


async def test_always_replaces_a_failed_vmi_and_records_the_failure() -> None:
    ctl, client, vmis, vm = vm_setup()
    vm["spec"]["runStrategy"] = "Always"
    ctl.vms.store.upsert(vm)
    vmis.store.upsert(
        {
            "metadata": {
                "name": "a",
                "namespace": "ns",
                "uid": "old",
                "ownerReferences": [
                    {"kind": "VirtualMachine", "uid": "vm-uid", "controller": True}
                ],
            },
            "status": {"phase": "Failed", "phaseTransitionTimestamps": [{"phase": "Scheduled"}]},
        }
    )
    await ctl.reconcile("ns/a")
    (deleted,) = client.writes("delete", "virtualmachineinstances")
    assert deleted["uid"] == "old"
    ops = client.writes("json_patch", "virtualmachines/status")[0]
    failure = next(o for o in ops if o["path"] == "/status/startFailure")["value"]
    assert failure["consecutiveFailCount"] == 1
    assert failure["retryAfterTimestamp"] == "2026-01-01T00:00:10Z"


async def test_a_live_migrate_vmi_that_cannot_migrate_is_non_evictable() -> None:
    ctl, _client, vmis, _pods = vmi_setup()
    raw = vmi_obj(phase="Running", nodeName="n1")
    raw["spec"]["evictionStrategy"] = "LiveMigrate"
    vmis.store.upsert(raw)
    await ctl.reconcile("ns/a")
    series = {"name": "a", "namespace": "ns", "node": "n1"}
    assert ctl.metrics.non_evictable.value(series) == 1  # no LiveMigratable yet: blocked
    raw["status"]["conditions"] = [{"type": "LiveMigratable", "status": "True"}]
    vmis.store.upsert(raw)
    await ctl.reconcile("ns/a")
    assert ctl.metrics.non_evictable.value(series) == 0


# -- Events and conditions, as upstream's controllers record and derive them ---------------


def events(client: RecordingClient) -> list[tuple[str, str, str]]:
    return [(e["type"], e["reason"], e["message"]) for e in client.writes("create", "events")]


def conditions(patch: Any) -> dict[str, Any]:
    return {c["type"]: c for c in patch["status"]["conditions"]}


def no_condition_written(client: RecordingClient) -> bool:
    patches = client.writes("merge_patch", "virtualmachineinstances")
    return all("conditions" not in p.get("status", {}) for p in patches)


class FailingClient(RecordingClient):
    """Refuses to create or delete `resource` (403), records the rest."""

    def __init__(self, resource: str) -> None:
        super().__init__()
        self.refused = resource

    async def create(
        self, resource: Any, body: dict[str, Any], namespace: str | None = None
    ) -> Any:
        if resource.plural == self.refused:
            raise ApiError(403, "Forbidden", f"{self.refused} is forbidden: quota exceeded")
        return await super().create(resource, body, namespace)

    async def delete(
        self, resource: Any, name: str, namespace: str | None = None, **kw: Any
    ) -> Any:
        if resource.plural == self.refused:
            raise ApiError(403, "Forbidden", f"{self.refused} is forbidden")
        return await super().delete(resource, name, namespace, **kw)


async def test_a_created_pod_is_a_successful_create_event_and_ready_says_pod_not_exists() -> None:
    ctl, client, vmis, _ = vmi_setup()
    vmis.store.upsert(vmi_obj())
    await ctl.reconcile("ns/a")
    assert events(client) == [
        ("Normal", "SuccessfulCreate", "Created virtual machine pod virt-launcher-a-x")
    ]
    (patch,) = client.writes("merge_patch", "virtualmachineinstances")
    ready = conditions(patch)["Ready"]
    assert (ready["status"], ready["reason"]) == ("False", "PodNotExists")


async def test_a_refused_pod_is_a_failed_create_warning() -> None:
    ctl, client, vmis, _ = vmi_setup(FailingClient("pods"))
    vmis.store.upsert(vmi_obj())
    await ctl.reconcile("ns/a")
    ((kind, reason, message),) = events(client)
    assert (kind, reason) == ("Warning", "FailedCreate")
    assert message.startswith("Error creating pod: ")
    assert "quota exceeded" in message
    (patch,) = client.writes("merge_patch", "virtualmachineinstances")
    assert conditions(patch)["Synchronized"]["reason"] == "FailedCreate"


def launcher_pod(**status: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "virt-launcher-a-x",
            "namespace": "ns",
            "uid": "pod-uid",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "ownerReferences": [
                {"kind": "VirtualMachineInstance", "uid": "vmi-uid", "controller": True}
            ],
        },
        "spec": {"nodeName": "n1"},
        "status": status,
    }


async def test_a_finished_vmis_pod_deletion_is_an_event_either_way() -> None:
    ctl, client, vmis, pods = vmi_setup()
    vmis.store.upsert(vmi_obj(phase="Succeeded", nodeName="n1"))
    pods.store.upsert(launcher_pod(phase="Running"))
    await ctl.reconcile("ns/a")
    assert events(client) == [
        ("Normal", "SuccessfulDelete", "Deleted virtual machine pod virt-launcher-a-x")
    ]
    ctl, client, vmis, pods = vmi_setup(FailingClient("pods"))
    vmis.store.upsert(vmi_obj(phase="Succeeded", nodeName="n1"))
    pods.store.upsert(launcher_pod(phase="Running"))
    with pytest.raises(ApiError):
        await ctl.reconcile("ns/a")
    assert events(client) == [
        ("Warning", "FailedDelete", "Failed to delete virtual machine pod virt-launcher-a-x")
    ]


POD_READY = {
    "type": "Ready",
    "status": "False",
    "reason": "ContainersNotReady",
    "message": "containers with unready status: [compute]",
    "lastTransitionTime": "2026-01-01T00:00:05Z",
}


@pytest.mark.parametrize(
    ("phase", "pod", "deleting", "reason"),
    [
        (
            "Scheduled",
            launcher_pod(phase="Running", conditions=[POD_READY]),
            False,
            "GuestNotRunning",
        ),
        ("Scheduled", launcher_pod(phase="Running"), True, "PodTerminating"),
        ("Running", launcher_pod(phase="Failed"), False, "PodTerminating"),
        ("Running", launcher_pod(phase="Running"), False, "PodConditionMissing"),
        (
            "Running",
            launcher_pod(phase="Running", conditions=[POD_READY]),
            False,
            "ContainersNotReady",
        ),
    ],
)
async def test_the_vmis_ready_condition_mirrors_its_pod(
    phase: str, pod: dict[str, Any], deleting: bool, reason: str
) -> None:
    ctl, client, vmis, pods = vmi_setup()
    vmis.store.upsert(vmi_obj(phase=phase, nodeName="n1"))
    if deleting:
        pod = {**pod, "metadata": {**pod["metadata"], "deletionTimestamp": "2026-01-01T00:00:09Z"}}
    pods.store.upsert(pod)
    await ctl.reconcile("ns/a")
    (patch,) = client.writes("merge_patch", "virtualmachineinstances")
    ready = conditions(patch)["Ready"]
    assert (ready["status"], ready["reason"]) == ("False", reason)
    if reason == "ContainersNotReady":  # copied, times included
        assert ready["message"] == POD_READY["message"]
        assert ready["lastTransitionTime"] == POD_READY["lastTransitionTime"]


async def test_a_ready_pod_makes_a_running_vmi_ready_and_nothing_is_rewritten_after() -> None:
    ctl, client, vmis, pods = vmi_setup()
    vmis.store.upsert(vmi_obj(phase="Running", nodeName="n1"))
    ready = {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:05Z"}
    pods.store.upsert(launcher_pod(phase="Running", conditions=[ready]))
    await ctl.reconcile("ns/a")
    (patch,) = client.writes("merge_patch", "virtualmachineinstances")
    assert conditions(patch)["Ready"]["status"] == "True"
    vmis.store.upsert(vmi_obj(phase="Running", nodeName="n1", **patch["status"]))
    client.calls.clear()
    await ctl.reconcile("ns/a")
    assert no_condition_written(client)


def pulling(reason: str, message: str = "Back-off pulling image") -> dict[str, Any]:
    waiting = {"waiting": {"reason": reason, "message": message}}
    return launcher_pod(
        phase="Pending",
        initContainerStatuses=[{"name": "volumerootdisk-init", "state": waiting}],
    )


async def test_an_image_the_kubelet_cannot_pull_shows_as_synchronized_false() -> None:
    ctl, client, vmis, pods = vmi_setup()
    vmis.store.upsert(vmi_obj(phase="Scheduled", nodeName="n1"))
    pods.store.upsert(pulling("ErrImagePull", "no such image: nowhere/none"))
    await ctl.reconcile("ns/a")
    (patch,) = client.writes("merge_patch", "virtualmachineinstances")
    synced = conditions(patch)["Synchronized"]
    assert (synced["status"], synced["reason"], synced["message"]) == (
        "False",
        "ErrImagePull",
        "no such image: nowhere/none",
    )
    # The kubelet backs off: the reason changes, and with it the condition.
    vmis.store.upsert(vmi_obj(phase="Scheduled", nodeName="n1", **patch["status"]))
    pods.store.upsert(pulling("ImagePullBackOff"))
    client.calls.clear()
    await ctl.reconcile("ns/a")
    (patch,) = client.writes("merge_patch", "virtualmachineinstances")
    assert conditions(patch)["Synchronized"]["reason"] == "ImagePullBackOff"
    # Only the message changes: no write (upstream's CheckFailure keeps the condition).
    vmis.store.upsert(vmi_obj(phase="Scheduled", nodeName="n1", **patch["status"]))
    pods.store.upsert(pulling("ImagePullBackOff", "Back-off pulling image again"))
    client.calls.clear()
    await ctl.reconcile("ns/a")
    assert no_condition_written(client)
    # Pulled at last: the condition goes.
    pods.store.upsert(launcher_pod(phase="Running"))
    client.calls.clear()
    await ctl.reconcile("ns/a")
    (patch,) = client.writes("merge_patch", "virtualmachineinstances")
    assert "Synchronized" not in conditions(patch)


async def test_a_started_vm_records_successful_create_with_upstreams_message() -> None:
    ctl, client, _, _ = vm_setup(stateChangeRequests=[{"action": "Start"}])
    await ctl.reconcile("ns/a")
    assert events(client) == [
        (
            "Normal",
            "SuccessfulCreate",
            "Started the virtual machine by creating the new virtual machine instance a",
        )
    ]


def owned_vmi(**status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstance",
        "metadata": {
            "name": "a",
            "namespace": "ns",
            "uid": "vmi-uid",
            "ownerReferences": [{"kind": "VirtualMachine", "uid": "vm-uid", "controller": True}],
        },
        "status": status,
    }


async def test_a_stopped_vm_records_successful_delete_naming_the_vmi_uid() -> None:
    ctl, client, vmis, vm = vm_setup()
    vm["spec"]["runStrategy"] = "Halted"
    ctl.vms.store.upsert(vm)
    vmis.store.upsert(owned_vmi(phase="Running"))
    await ctl.reconcile("ns/a")
    assert events(client) == [
        (
            "Normal",
            "SuccessfulDelete",
            "Stopped the virtual machine by deleting the virtual machine instance vmi-uid",
        )
    ]


async def test_a_vmi_the_api_refuses_is_a_failed_create_warning_and_retried() -> None:
    ctl, _, _, _ = vm_setup(stateChangeRequests=[{"action": "Start"}])
    failing = FailingClient("virtualmachineinstances")
    ctl.client = cast(KubeClient, failing)
    assert ctl.recorder is not None
    ctl.recorder.client = cast(KubeClient, failing)
    with pytest.raises(ApiError):  # the queue retries it with back-off
        await ctl.reconcile("ns/a")
    ((kind, reason, message),) = events(failing)
    assert (kind, reason) == ("Warning", "FailedCreate")
    assert message.startswith("Error creating virtual machine instance: ")


def vm_conditions(client: RecordingClient) -> dict[str, Any]:
    (ops,) = client.writes("json_patch", "virtualmachines/status")
    (op,) = [o for o in ops if o["path"] == "/status/conditions"]
    return {c["type"]: c for c in op["value"]}


async def test_the_vms_ready_says_why_there_is_nothing_to_copy() -> None:
    ctl, client, vmis, _ = vm_setup()
    await ctl.reconcile("ns/a")
    ready = vm_conditions(client)["Ready"]
    assert (ready["status"], ready["reason"]) == ("False", "VMINotExists")
    ctl, client, vmis, _ = vm_setup()
    vmis.store.upsert(owned_vmi(phase="Pending"))
    await ctl.reconcile("ns/a")
    ready = vm_conditions(client)["Ready"]
    assert (ready["status"], ready["reason"]) == ("False", "VMIConditionMissing")


async def test_the_vm_copies_the_vmis_ready_and_other_conditions() -> None:
    ctl, client, vmis, _ = vm_setup()
    vmi_conditions = [
        {"type": "Ready", "status": "False", "reason": "GuestNotRunning", "message": "m"},
        {"type": "Paused", "status": "True", "reason": "PausedByUser"},
        {"type": "AgentConnected", "status": "True"},
        {"type": "LiveMigratable", "status": "False", "reason": "DisksNotLiveMigratable"},
    ]
    vmis.store.upsert(owned_vmi(phase="Running", conditions=vmi_conditions))
    await ctl.reconcile("ns/a")
    copied = vm_conditions(client)
    assert (copied["Ready"]["reason"], copied["Ready"]["message"]) == ("GuestNotRunning", "m")
    assert copied["Paused"]["reason"] == "PausedByUser"
    assert copied["LiveMigratable"]["reason"] == "DisksNotLiveMigratable"
    assert "AgentConnected" in copied
    # The agent leaves the VMI: its condition leaves the VM; the VM's own stay.
    vm = ctl.vms.get_raw("ns/a")
    assert vm is not None
    restart = {"type": "RestartRequired", "status": "True"}
    ctl.vms.store.upsert({**vm, "status": {"conditions": [*copied.values(), restart]}})
    vmis.store.upsert(owned_vmi(phase="Running", conditions=vmi_conditions[:2]))
    client.calls.clear()
    await ctl.reconcile("ns/a")
    assert set(vm_conditions(client)) == {"Ready", "Paused", "RestartRequired"}


async def test_the_vm_shows_err_image_pull_from_its_vmi() -> None:
    ctl, client, vmis, _ = vm_setup()
    synced = {"type": "Synchronized", "status": "False", "reason": "ErrImagePull"}
    vmis.store.upsert(owned_vmi(phase="Scheduled", conditions=[synced]))
    await ctl.reconcile("ns/a")
    (ops,) = client.writes("json_patch", "virtualmachines/status")
    (printable,) = [o["value"] for o in ops if o["path"] == "/status/printableStatus"]
    assert printable == "ErrImagePull"
    assert vm_conditions(client)["Synchronized"]["reason"] == "ErrImagePull"


# -- PVC volumes: the pod waits for a missing claim, a Block claim is a device, volumeStatus


def claim_vmi() -> dict[str, Any]:
    vmi = vmi_obj()
    vmi["spec"]["domain"]["devices"]["disks"] = [
        {"name": "data", "disk": {}},
        {"name": "root", "disk": {}},
    ]
    vmi["spec"]["volumes"] = [
        {"name": "root", "containerDisk": {"image": "kubevirt-py/guest:devel"}},
        {"name": "data", "persistentVolumeClaim": {"claimName": "data-pvc"}},
    ]
    return vmi


def claim_obj(mode: str | None = None, **meta: str) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "1Gi"}},
    }
    if mode is not None:
        spec["volumeMode"] = mode
    return {
        "metadata": {"name": "data-pvc", "namespace": "ns", "uid": "pvc-uid", **meta},
        "spec": spec,
        "status": {"phase": "Bound", "capacity": {"storage": "2Gi"}},
    }


async def test_a_missing_claim_holds_the_pod_back_and_its_arrival_requeues_the_vmi() -> None:
    claims = informer("persistentvolumeclaims")
    ctl, client, vmis, _pods = vmi_setup(claims=claims)
    vmis.store.upsert(claim_vmi())
    with pytest.raises(PodCreationBlockedError):
        await ctl.reconcile("ns/a")
    assert client.writes("create", "pods") == []
    (patch,) = client.writes("merge_patch", "virtualmachineinstances")
    (synced,) = [c for c in patch["status"]["conditions"] if c["type"] == "Synchronized"]
    message = "PVC ns/data-pvc does not exist, waiting for it to appear"
    assert (synced["status"], synced["reason"], synced["message"]) == (
        "False",
        "FailedPvcNotFound",
        message,
    )
    (event,) = client.writes("create", "events")
    assert (event["type"], event["reason"], event["message"]) == (
        "Normal",
        "FailedPvcNotFound",
        message,
    )

    assert len(ctl.queue) == 0
    ctl.on_claim(added(claims, claim_obj()))
    assert len(ctl.queue) == 1
    client.calls.clear()
    await ctl.reconcile("ns/a")
    (pod,) = client.writes("create", "pods")
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert volumes["data"]["persistentVolumeClaim"]["claimName"] == "data-pvc"


async def test_a_claim_of_another_name_or_namespace_does_not_requeue() -> None:
    claims = informer("persistentvolumeclaims")
    ctl, _client, vmis, _pods = vmi_setup(claims=claims)
    vmis.store.upsert(claim_vmi())
    ctl.on_claim(added(claims, claim_obj(namespace="elsewhere")))
    ctl.on_claim(added(claims, claim_obj(name="other-pvc")))
    assert len(ctl.queue) == 0


async def test_a_block_claim_reaches_the_launcher_as_a_device() -> None:
    claims = informer("persistentvolumeclaims")
    ctl, client, vmis, _pods = vmi_setup(claims=claims)
    vmis.store.upsert(claim_vmi())
    claims.store.upsert(claim_obj("Block"))
    await ctl.reconcile("ns/a")
    (pod,) = client.writes("create", "pods")
    (compute,) = [c for c in pod["spec"]["containers"] if c["name"] == "compute"]
    assert compute["volumeDevices"] == [{"name": "data", "devicePath": "/dev/data"}]


async def test_the_vmi_reports_each_volume_and_its_claim_as_upstream() -> None:
    claims = informer("persistentvolumeclaims")
    ctl, client, vmis, pods = vmi_setup(claims=claims)
    vmis.store.upsert(claim_vmi())
    claims.store.upsert(claim_obj())
    await ctl.reconcile("ns/a")
    (patch,) = client.writes("merge_patch", "virtualmachineinstances")
    assert patch["status"]["volumeStatus"] == [
        {
            "name": "data",
            "target": "",
            "persistentVolumeClaimInfo": {
                "claimName": "data-pvc",
                "accessModes": ["ReadWriteOnce"],
                "volumeMode": "Filesystem",
                "capacity": {"storage": "2Gi"},
                "requests": {"storage": "1Gi"},
                "filesystemOverhead": "0.055",
            },
        },
        {"name": "root", "target": ""},
    ]

    # Written once: the same status is not patched again.
    vmi = claim_vmi()
    vmi["status"]["volumeStatus"] = patch["status"]["volumeStatus"]
    vmis.store.upsert(vmi)
    (created,) = client.writes("create", "pods")
    client.calls.clear()
    ctl.on_pod(added(pods, created))
    await ctl.reconcile("ns/a")
    for again in client.writes("merge_patch", "virtualmachineinstances"):
        assert "volumeStatus" not in again.get("status", {})


def persistent_efi_vmi() -> dict[str, Any]:
    vmi = vmi_obj()
    vmi["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "kubevirt.io/v1",
            "kind": "VirtualMachine",
            "name": "a",
            "uid": "vm-uid",
            "controller": True,
        }
    ]
    vmi["spec"]["domain"]["firmware"] = {
        "bootloader": {"efi": {"secureBoot": False, "persistent": True}}
    }
    return vmi


async def test_persistent_efi_gets_a_backend_claim_owned_by_the_vm_mounted_in_the_pod() -> None:
    claims = informer("claims")
    ctl, client, vmis, _ = vmi_setup(claims=claims)
    vmis.store.upsert(persistent_efi_vmi())
    await ctl.reconcile("ns/a")
    (claim,) = client.writes("create", "persistentvolumeclaims")
    assert claim["metadata"]["name"] == "persistent-state-for-a"
    assert claim["metadata"]["labels"] == {"persistent-state-for": "a"}
    (owner,) = claim["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("VirtualMachine", "a", "vm-uid")
    assert claim["spec"]["resources"] == {"requests": {"storage": "10Mi"}}
    assert claim["spec"]["volumeMode"] == "Filesystem"
    assert "storageClassName" not in claim["spec"]  # the cluster's default
    (pod,) = client.writes("create", "pods")
    volume = next(v for v in pod["spec"]["volumes"] if v["name"] == "vm-state")
    assert volume["persistentVolumeClaim"] == {"claimName": "persistent-state-for-a"}
    (compute,) = pod["spec"]["containers"]
    mount = next(m for m in compute["volumeMounts"] if m["name"] == "vm-state")
    assert mount["mountPath"] == "/var/lib/kubevirt-backend-storage"


async def test_an_existing_backend_claim_is_not_created_again() -> None:
    claims = informer("claims")
    claims.store.upsert(
        {"metadata": {"name": "persistent-state-for-a", "namespace": "ns"}, "spec": {}}
    )
    ctl, client, vmis, _ = vmi_setup(claims=claims)
    vmis.store.upsert(persistent_efi_vmi())
    await ctl.reconcile("ns/a")
    assert client.writes("create", "persistentvolumeclaims") == []
    assert len(client.writes("create", "pods")) == 1


async def test_a_vmi_without_persistent_state_gets_no_backend_claim() -> None:
    ctl, client, vmis, _ = vmi_setup(claims=informer("claims"))
    vmi = vmi_obj()
    vmi["spec"]["domain"]["firmware"] = {"bootloader": {"efi": {"secureBoot": False}}}
    vmis.store.upsert(vmi)
    await ctl.reconcile("ns/a")
    assert client.writes("create", "persistentvolumeclaims") == []
    (pod,) = client.writes("create", "pods")
    assert all(v["name"] != "vm-state" for v in pod["spec"]["volumes"])


async def test_a_memory_dump_request_puts_its_volume_into_the_vm_and_the_running_vmi() -> None:
    request = {"claimName": "dump", "phase": "Associating"}
    ctl, client, vmis, vm = vm_setup(memoryDumpRequest=request)
    vm["spec"]["runStrategy"] = "Always"
    ctl.vms.store.upsert(vm)
    vmis.store.upsert(
        {
            "metadata": {
                "name": "a",
                "namespace": "ns",
                "uid": "vmi-uid",
                "ownerReferences": [
                    {"kind": "VirtualMachine", "uid": "vm-uid", "controller": True}
                ],
            },
            "spec": {"domain": {"devices": {}}},
            "status": {"phase": "Running"},
        }
    )
    await ctl.reconcile("ns/a")
    volume = {"name": "dump", "memoryDump": {"claimName": "dump", "hotpluggable": True}}
    (vm_ops,) = client.writes("json_patch", "virtualmachines")
    assert vm_ops[-1] == {"op": "add", "path": "/spec/template/spec/volumes", "value": [volume]}
    (vmi_ops,) = client.writes("json_patch", "virtualmachineinstances")
    assert vmi_ops[-1] == {"op": "add", "path": "/spec/volumes", "value": [volume]}
    (status_ops,) = client.writes("json_patch", "virtualmachines/status")
    assert {"op": "test", "path": "/status/memoryDumpRequest", "value": request} in status_ops
    assert {
        "op": "replace",
        "path": "/status/memoryDumpRequest",
        "value": {"claimName": "dump", "phase": "InProgress"},
    } in status_ops
