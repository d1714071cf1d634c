"""The VMI and VM controllers' reconcile against in-memory caches and a recording client:
expectations prevent duplicate pods, owner references (not labels) decide ownership, and
state change requests are consumed with a guarded patch."""

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
from virt_controller.vmi import OWNER_INDEX, PodCreationBlockedError, VmiController

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


async def test_bound_pod_makes_the_vmi_scheduled_with_node_label() -> None:
    ctl, client, vmis, pods = vmi_setup()
    vmis.store.upsert(vmi_obj(phase="Pending"))
    await ctl.reconcile("ns/a")
    pod = dict(client.writes("create", "pods")[0])
    pod["spec"] = {**pod["spec"], "nodeName": "n1"}
    pods.store.upsert(pod)
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
    (gate,) = client.writes("request", "/api/v1/namespaces/ns/pods/virt-launcher-a-x/status")
    assert gate["status"]["conditions"][0]["type"] == "kubevirt.io/virtual-machine-unpaused"
    assert gate["status"]["conditions"][0]["status"] == "True"


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
    (synced,) = patch["status"]["conditions"]
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
    assert patch["status"]["conditions"] == []


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
    pods = informer("pods", **{OWNER_INDEX: index_by_controller("VirtualMachineInstance")})
    queue: WorkQueue[str] = WorkQueue("t", clock=ManualClock())
    ctl = VmController(
        cast(KubeClient, client),
        vms,
        vmis,
        pods,
        queue,
        ControllerMetrics(MetricsRegistry()),
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
