"""Fakes for virt-handler's unit tests: one node, a recording API client, a fake launcher, a CA.

`Node` wires a real `VmiSync` to in-memory informer stores, a `RecordingClient`, a
real `EventRecorder` and a `WorkQueue` on one `ManualClock`; the launcher is a `Cmd`
service served by grpclib on the pod's real `launcher-sock` in a tmp kubelet pods dir,
so the socket discovery, pinning and version handshake of production run unchanged.
The pod network setup (netns ioctls, root-only) is replaced by a recorder.
"""

from __future__ import annotations

import copy
import datetime as dt
import ipaddress
import json
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, cast

import grpclib
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from grpclib.client import Channel
from grpclib.const import Status
from grpclib.server import Server
from kube_runtime import (
    EVENTS,
    EventRecorder,
    KubeClient,
    ManualClock,
    RawObject,
    Resource,
    SharedInformer,
    WorkQueue,
)
from kube_runtime.fakes import FakeListWatch
from virt_handler import vmi_sync
from virt_handler.network import SetupResult
from virt_handler.podfiles import LAUNCHER_SOCKET, NOTIFY_SOCKET, PodFiles, PodUid
from virt_handler.vmi_sync import SyncSettings, VmiSync
from virt_rpc import (
    CmdBase,
    Domain,
    DomainEvent,
    DomainEventType,
    DomainReason,
    DomainResponse,
    DomainState,
    DomainStats,
    FreezeRequest,
    GetDomainRequest,
    GetDomainStatsRequest,
    GetDomainStatsResponse,
    GetGuestInfoRequest,
    GetGuestInfoResponse,
    GuestInfo,
    HandshakeService,
    MigrateRequest,
    MigrationMetadata,
    NotifyStub,
    PingRequest,
    PingResponse,
    ShutdownRequest,
    SyncVirtualMachineRequest,
    VmiRef,
    VmiRequest,
    negotiate,
    serve_unix,
)

NODE = "node-1"
VMI_UID = "7a1f0c3e-2b4d-4e6f-8a9b-0c1d2e3f4a5b"
POD_UID = "0b7c2b4e-6d0e-4f5e-9a53-1d5a0b7c2b4e"
KEY = "ns/vm"
IMAGE = "registry.local/virt-launcher:v1"


class RecordingClient:
    """The API calls the handler makes: status merge patches and Events."""

    def __init__(self) -> None:
        self.patches: list[tuple[str, str, dict[str, Any]]] = []
        self.events: list[dict[str, Any]] = []
        self.fail_next_patch: list[Exception] = []

    async def merge_patch(
        self, resource: Resource, name: str, body: Any, namespace: str | None = None, **_: Any
    ) -> Any:
        if resource == EVENTS:  # a repeat of an Event: its count is bumped
            for event in self.events:
                if event["metadata"]["name"] == name:
                    event.update(body)
            return {}
        if self.fail_next_patch:
            raise self.fail_next_patch.pop(0)
        self.patches.append((resource.plural, name, copy.deepcopy(body)))
        return {}

    async def create(
        self, resource: Resource, body: Any, namespace: str | None = None, **_: Any
    ) -> Any:
        assert resource == EVENTS, resource
        self.events.append(copy.deepcopy(body))
        return body

    def reasons(self) -> list[str]:
        """Each Event's reason, once per time it was recorded (an Event's count repeats it)."""
        return [str(e["reason"]) for e in self.events for _ in range(int(e["count"]))]

    def status_patches(self) -> list[dict[str, Any]]:
        return [
            body["status"]
            for plural, _, body in self.patches
            if plural == "virtualmachineinstances"
        ]


class FakeLauncher(CmdBase):
    """virt-launcher's Cmd service for one guest, recording every call it gets.

    `state` UNSPECIFIED: no domain defined yet (a fresh launcher).
    """

    def __init__(self) -> None:
        self.state = DomainState.UNSPECIFIED
        self.reason = DomainReason.UNSPECIFIED
        #: Raised by SyncVirtualMachine (a launcher refusing the VMI).
        self.sync_error: grpclib.GRPCError | None = None
        #: Raised by the next Shutdown calls, one each (then they succeed).
        self.shutdown_errors: list[grpclib.GRPCError] = []
        self.stats: DomainStats | None = None
        #: Every stats call fails as from a launcher that does not answer.
        self.down = False
        self.calls: list[str] = []
        self.syncs: list[SyncVirtualMachineRequest] = []
        #: What GetGuestInfo answers (None: the launcher's "no agent").
        self.guest: GuestInfo | None = None
        self.freezes: list[FreezeRequest] = []
        self.migrations: list[MigrateRequest] = []

    def _domain(self) -> Domain:
        return Domain(name="ns_vm", state=self.state, reason=self.reason)

    async def ping(self, message: PingRequest) -> PingResponse:
        return PingResponse()

    async def get_domain(self, message: GetDomainRequest) -> DomainResponse:
        self.calls.append("GetDomain")
        if self.state is DomainState.UNSPECIFIED:
            return DomainResponse()
        return DomainResponse(domain=self._domain())

    async def sync_virtual_machine(self, message: SyncVirtualMachineRequest) -> DomainResponse:
        self.calls.append("SyncVirtualMachine")
        self.syncs.append(message)
        if self.sync_error is not None:
            raise self.sync_error
        self.state, self.reason = DomainState.RUNNING, DomainReason.BOOTED
        return DomainResponse(domain=self._domain())

    async def get_guest_info(self, message: GetGuestInfoRequest) -> GetGuestInfoResponse:
        return GetGuestInfoResponse(info=self.guest or GuestInfo(agent_connected=False))

    async def freeze(self, message: FreezeRequest) -> DomainResponse:
        self.calls.append("Freeze")
        if self.guest is None or not self.guest.agent_connected:
            raise grpclib.GRPCError(Status.FAILED_PRECONDITION, "the guest agent is not connected")
        self.freezes.append(message)
        return DomainResponse(domain=self._domain())

    async def unfreeze(self, message: VmiRequest) -> DomainResponse:
        self.calls.append("Unfreeze")
        return DomainResponse(domain=self._domain())

    async def shutdown(self, message: ShutdownRequest) -> DomainResponse:
        self.calls.append("Shutdown")
        if self.shutdown_errors:
            raise self.shutdown_errors.pop(0)
        self.state, self.reason = DomainState.SHUTTING_DOWN, DomainReason.USER
        return DomainResponse(domain=self._domain())

    async def kill(self, message: VmiRequest) -> DomainResponse:
        self.calls.append("Kill")
        return DomainResponse(domain=self._domain())

    async def pause(self, message: VmiRequest) -> DomainResponse:
        self.calls.append("Pause")
        if self.state is not DomainState.RUNNING:
            raise grpclib.GRPCError(Status.FAILED_PRECONDITION, "the domain is not running")
        self.state, self.reason = DomainState.PAUSED, DomainReason.USER
        return DomainResponse(domain=self._domain())

    # -- live migration: the source's and the target's calls

    async def migrate(self, message: MigrateRequest) -> DomainResponse:
        self.calls.append("Migrate")
        self.migrations.append(message)
        return DomainResponse(domain=self._domain())

    async def cancel_migration(self, message: VmiRequest) -> DomainResponse:
        self.calls.append("CancelMigration")
        return DomainResponse(domain=self._domain())

    async def delete(self, message: VmiRequest) -> DomainResponse:
        self.calls.append("Delete")
        return DomainResponse()

    async def prepare_migration_target(self, message: SyncVirtualMachineRequest) -> DomainResponse:
        self.calls.append("PrepareMigrationTarget")
        self.syncs.append(message)
        if self.sync_error is not None:
            raise self.sync_error
        return DomainResponse()

    async def finalize_migration(self, message: VmiRequest) -> DomainResponse:
        self.calls.append("FinalizeMigration")
        return DomainResponse(domain=self._domain())

    async def get_domain_stats(self, message: GetDomainStatsRequest) -> GetDomainStatsResponse:
        self.calls.append("GetDomainStats")
        if self.down:
            raise grpclib.GRPCError(Status.UNAVAILABLE, "the launcher does not answer")
        return GetDomainStatsResponse(stats=self.stats)


def vmi_body(phase: str = "Scheduled", **status: Any) -> dict[str, Any]:
    """A VMI on this node, as virt-controller leaves it once its pod is scheduled."""
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstance",
        "metadata": {
            "name": "vm",
            "namespace": "ns",
            "uid": VMI_UID,
            "resourceVersion": "7",
            "labels": {"kubevirt.io/nodeName": NODE},
        },
        "spec": {
            "domain": {
                "devices": {"autoattachPodInterface": False},
                "resources": {"requests": {"memory": "64Mi"}},
            }
        },
        "status": {"phase": phase, "nodeName": NODE, **status},
    }


def pod_body(phase: str = "Running", **status: Any) -> dict[str, Any]:
    """The VMI's launcher pod, bound to this node, controlled by the VMI."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "virt-launcher-vm-abcde",
            "namespace": "ns",
            "uid": POD_UID,
            "labels": {"kubevirt.io": "virt-launcher"},
            "ownerReferences": [
                {
                    "apiVersion": "kubevirt.io/v1",
                    "kind": "VirtualMachineInstance",
                    "name": "vm",
                    "uid": VMI_UID,
                    "controller": True,
                }
            ],
        },
        "spec": {"nodeName": NODE, "containers": [{"name": "compute", "image": IMAGE}]},
        # What a kubelet reports for a running launcher whose readiness gate is True.
        "status": {"phase": phase, **_READY_IF_RUNNING.get(phase, {}), **status},
    }


_READY_IF_RUNNING: dict[str, dict[str, Any]] = {
    "Running": {"conditions": [{"type": "Ready", "status": "True"}]}
}


class Node:
    """One virt-handler and the cluster objects it sees."""

    key = KEY
    name = NODE
    image = IMAGE
    vmi_uid = VMI_UID
    pod_uid = POD_UID
    vmi_body = staticmethod(vmi_body)
    pod_body = staticmethod(pod_body)

    def __init__(self, pods_dir: Path) -> None:
        self.pods_dir = pods_dir
        self.clock = ManualClock()
        self.client = RecordingClient()
        self.vmis: SharedInformer[RawObject] = SharedInformer(FakeListWatch(), name="vmis")
        self.pods: SharedInformer[RawObject] = SharedInformer(FakeListWatch(), name="pods")
        self.queue: WorkQueue[str] = WorkQueue("virt-handler-vmi", clock=self.clock)
        kube = cast(KubeClient, self.client)
        self.sync = VmiSync(
            kube,
            self.vmis,
            self.pods,
            self.queue,
            PodFiles(pods_dir),
            EventRecorder(kube, "virt-handler", host=NODE, clock=self.clock),
            SyncSettings(node=NODE),
            clock=self.clock,
        )
        self.launcher = FakeLauncher()
        self._servers: list[Server] = []
        self.network_setups: list[PodUid] = []
        self._sequence = 0

    def put_vmi(self, body: dict[str, Any]) -> None:
        self.vmis.store.upsert(body)

    def put_pod(self, body: dict[str, Any]) -> None:
        self.pods.store.upsert(body)

    def sockets_dir(self) -> Path:
        path = self.pods_dir / POD_UID / "volumes" / "kubernetes.io~empty-dir" / "sockets"
        path.mkdir(parents=True, exist_ok=True)
        return path

    async def launcher_ready(self) -> None:
        """A Scheduled VMI, its running pod, and its launcher answering on launcher-sock."""
        self.put_vmi(vmi_body("Scheduled"))
        self.put_pod(pod_body("Running"))
        await self.start_launcher()

    async def guest_running(self) -> None:
        """launcher_ready, one reconcile, and the informer showing the Running VMI."""
        await self.launcher_ready()
        await self.sync.reconcile(KEY)
        self.put_vmi(self.applied())

    async def start_launcher(self, at: Path | None = None) -> None:
        """Serve the fake launcher on `launcher-sock` (or at `at`, e.g. outside the pod)."""
        where = at or self.sockets_dir()
        # Bound through a short /proc path: the test's tmp dir can be deeper than 107 bytes.
        fd = os.open(where, os.O_PATH | os.O_DIRECTORY)
        try:
            server = await serve_unix(
                [self.launcher, HandshakeService("virt-launcher", "test")],
                f"/proc/self/fd/{fd}/{LAUNCHER_SOCKET}",
            )
        finally:
            os.close(fd)
        self._servers.append(server)

    async def notify(
        self,
        state: DomainState,
        reason: DomainReason,
        kind: DomainEventType = DomainEventType.MODIFIED,
        guest: GuestInfo | None = None,
        migration: MigrationMetadata | None = None,
        *,
        pod_stopping: bool = False,
    ) -> None:
        """Send a domain event to the handler's Notify socket, as the launcher does."""
        self._sequence += 1
        fd = os.open(self.sockets_dir(), os.O_PATH | os.O_DIRECTORY)
        channel = Channel(path=f"/proc/self/fd/{fd}/{NOTIFY_SOCKET}")
        try:
            await NotifyStub(channel, timeout=5).handle_domain_event(
                DomainEvent(
                    vmi=VmiRef(namespace="ns", name="vm", uid=VMI_UID),
                    type=kind,
                    domain=Domain(
                        name="ns_vm",
                        state=state,
                        reason=reason,
                        guest=guest,
                        migration=migration,
                        pod_stopping=pod_stopping,
                    ),
                    sequence=self._sequence,
                )
            )
        finally:
            channel.close()
            os.close(fd)

    async def hello(self) -> None:
        """Say hello on the handler's Notify socket, as a launcher that just became ready."""
        fd = os.open(self.sockets_dir(), os.O_PATH | os.O_DIRECTORY)
        channel = Channel(path=f"/proc/self/fd/{fd}/{NOTIFY_SOCKET}")
        try:
            await negotiate(channel, "virt-launcher", "test")
        finally:
            channel.close()
            os.close(fd)

    def applied(self) -> dict[str, Any]:
        """The VMI as the API server holds it after the handler's status patches."""
        raw = self.vmis.get_raw(KEY)
        assert raw is not None
        body = json.loads(json.dumps(raw))
        for patch in self.client.status_patches():
            body["status"].update(patch)
        body["metadata"]["resourceVersion"] = str(int(body["metadata"]["resourceVersion"]) + 1)
        return cast(dict[str, Any], body)

    async def close(self) -> None:
        await self.sync.close()
        for server in self._servers:
            server.close()
            await server.wait_closed()


@pytest.fixture
async def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Node]:
    handler = Node(tmp_path / "pods")

    # The one stand-in for network.setup_pod_network (netns work needs a real pod; the
    # real thing runs in integration/network).
    async def setup_pod_network(pod: PodUid, vmi: object, *_: object) -> SetupResult:
        handler.network_setups.append(pod)
        return SetupResult()

    monkeypatch.setattr(vmi_sync, "setup_pod_network", setup_pod_network)
    try:
        yield handler
    finally:
        await handler.close()


class Authority:
    """A throwaway CA writing PEM files: the cluster CA, or a stranger's."""

    def __init__(self, directory: Path, name: str) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = dt.datetime.now(dt.UTC)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self.key, hashes.SHA256())
        )
        self.ca = directory / "ca.crt"
        self.ca.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))

    def issue(self, name: str, *, server: bool = False) -> tuple[Path, Path]:
        """`name`.crt and `name`.key: a server (localhost, 127.0.0.1) or client certificate."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
        if server:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
                ),
                critical=False,
            )
        cert = builder.sign(self.key, hashes.SHA256())
        cert_path, key_path = self.directory / f"{name}.crt", self.directory / f"{name}.key"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_path.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        return cert_path, key_path


@pytest.fixture
def authority(tmp_path: Path) -> Callable[[str], Authority]:
    """Make a CA named `name` under tmp_path."""
    return lambda name: Authority(tmp_path / name, name)
