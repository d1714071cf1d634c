"""The VirtualMachineExport controller against in-memory caches and a small fake API server:
sources (PVC, VM, snapshot), in-use and missing sources, the token, Service and exporter
pod, status and links, TTL expiry, as upstream."""

from __future__ import annotations

import copy
import datetime as dt
import itertools
import ssl
from typing import Any, cast

import pytest
from cryptography import x509
from kube_runtime import (
    ApiError,
    KubeClient,
    ManualClock,
    RawObject,
    SharedInformer,
    WorkQueue,
    thaw,
)
from kube_runtime.fakes import FakeListWatch
from kube_runtime.informers import DeltaType, Event
from kubevirt_api import exports as ex
from virt_controller.export import EXPORT_SOURCE_INDEX, ExportController, index_by_export_source
from virt_controller.exportcert import ServerCert, self_signed

START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


class FakeApiServer:
    """Stores what the controller writes into the informers' caches, as a watch would."""

    def __init__(self) -> None:
        self.caches: dict[str, SharedInformer[RawObject]] = {
            plural: SharedInformer(FakeListWatch(), name=plural, indexers=indexers)
            for plural, indexers in {
                "virtualmachineexports": {EXPORT_SOURCE_INDEX: index_by_export_source},
                "pods": None,
                "services": None,
                "persistentvolumeclaims": None,
                "virtualmachines": None,
                "virtualmachineinstances": None,
            }.items()
        }
        #: Objects no informer of the controller watches (Secrets, launcher pods).
        self.other: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.writes: list[tuple[str, str, str]] = []
        self.handlers: dict[str, Any] = {}
        self._ids = itertools.count(1)

    def put(self, plural: str, obj: dict[str, Any]) -> dict[str, Any]:
        m = obj["metadata"]
        m.setdefault("namespace", "ns")
        m.setdefault("uid", f"uid-{next(self._ids)}")
        m.setdefault("creationTimestamp", "2026-01-01T00:00:00Z")
        if plural not in self.caches:
            self.other[(plural, m["namespace"], m["name"])] = copy.deepcopy(obj)
            return obj
        cache = self.caches[plural]
        old = cache.get_raw(f"{m['namespace']}/{m['name']}")
        delta = cache.store.upsert(copy.deepcopy(obj))
        kind = DeltaType.ADDED if old is None else DeltaType.UPDATED
        event = Event(kind, delta.key, delta.obj, old, False, cache.decode)
        for handler in self.handlers.get(plural, ()):
            handler(event)
        return obj

    def obj(self, plural: str, name: str, namespace: str = "ns") -> Any:
        if plural not in self.caches:
            return self.other.get((plural, namespace, name))
        raw = self.caches[plural].get_raw(f"{namespace}/{name}")
        return thaw(raw) if raw is not None else None

    def remove(self, plural: str, name: str, namespace: str = "ns") -> None:
        cache = self.caches[plural]
        raw = cache.get_raw(f"{namespace}/{name}")
        assert raw is not None
        cache.store.delete(raw)

    # -- the client the controller sees ----------------------------------------------------

    async def create(self, resource: Any, body: dict[str, Any], namespace: Any = None) -> Any:
        m = body["metadata"]
        self.writes.append(("create", resource.plural, m["name"]))
        if self.obj(resource.plural, m["name"], m["namespace"]) is not None:
            raise ApiError(409, "AlreadyExists", f"{m['name']} exists")
        return self.put(resource.plural, copy.deepcopy(body))

    async def delete(self, resource: Any, name: str, namespace: str, **kw: Any) -> Any:
        self.writes.append(("delete", resource.plural, name))
        obj = self.obj(resource.plural, name, namespace)
        if obj is None:
            raise ApiError(404, "NotFound", f"{name} not found")
        if kw.get("uid") and kw["uid"] != obj["metadata"]["uid"]:
            raise ApiError(409, "Conflict", "uid precondition")
        self.remove(resource.plural, name, namespace)
        return {}

    async def list(self, resource: Any, namespace: str, **kw: Any) -> Any:
        items = [
            o for (p, ns, _), o in self.other.items() if p == resource.plural and ns == namespace
        ]
        if resource.plural in self.caches:
            items += [thaw(o) for o in self.caches[resource.plural].store.objects()]
        return {"items": items}

    async def merge_patch(
        self, resource: Any, name: str, patch: Any, namespace: str, **kw: Any
    ) -> Any:
        self.writes.append(("patch", resource.plural, name))
        obj = self.obj(resource.plural, name, namespace)
        obj.update(copy.deepcopy(patch))
        return self.put(resource.plural, obj)

    async def patch_status(
        self, resource: Any, name: str, status: Any, namespace: str, **kw: Any
    ) -> Any:
        self.writes.append(("status", resource.plural, name))
        obj = self.obj(resource.plural, name, namespace)
        merged = obj.setdefault("status", {})
        for k, v in copy.deepcopy(status).items():
            if v is None:
                merged.pop(k, None)
            else:
                merged[k] = v
        return self.put(resource.plural, obj)


def fake_cert(names: list[str], now: dt.datetime, lifetime: dt.timedelta) -> ServerCert:
    return ServerCert(f"CERT for {names[0]} until {now + lifetime:%H:%M}", "KEY")


class Rig:
    def __init__(self) -> None:
        self.api = FakeApiServer()
        self.clock = ManualClock()
        self.certs: list[list[str]] = []
        c = self.api.caches

        def make_cert(names: list[str], now: dt.datetime, lifetime: dt.timedelta) -> ServerCert:
            self.certs.append(names)
            return fake_cert(names, now, lifetime)

        self.ctl = ExportController(
            cast(KubeClient, self.api),
            c["virtualmachineexports"],
            c["pods"],
            c["services"],
            c["persistentvolumeclaims"],
            c["virtualmachines"],
            c["virtualmachineinstances"],
            WorkQueue("export", clock=self.clock),
            image=lambda: ("registry.local/virt-exportserver:t", "IfNotPresent"),
            make_cert=make_cert,
            make_token=lambda: "s3cret-token",
        )
        self.api.handlers = {
            "virtualmachineexports": [self.ctl.on_export],
            "pods": [self.ctl.on_owned],
            "services": [self.ctl.on_owned],
            "persistentvolumeclaims": [self.ctl.on_claim],
            "virtualmachines": [self.ctl.on_vm],
            "virtualmachineinstances": [self.ctl.on_vmi],
        }

    def export(
        self, kind: str = "PersistentVolumeClaim", source: str = "disk", **spec: Any
    ) -> None:
        group = {"VirtualMachine": "kubevirt.io", "VirtualMachineSnapshot": "snapshot.kubevirt.io"}
        ref: dict[str, Any] = {"kind": kind, "name": source}
        if kind in group:
            ref["apiGroup"] = group[kind]
        self.api.put(
            "virtualmachineexports",
            {
                "apiVersion": "export.kubevirt.io/v1",
                "kind": "VirtualMachineExport",
                "metadata": {"name": "exp", "uid": "export-uid"},
                "spec": {"source": ref, **spec},
            },
        )

    def claim(self, name: str = "disk", phase: str = "Bound", mode: str = "Filesystem") -> None:
        self.api.put(
            "persistentvolumeclaims",
            {"metadata": {"name": name}, "spec": {"volumeMode": mode}, "status": {"phase": phase}},
        )

    def vm(self, *volumes: dict[str, Any]) -> None:
        self.api.put(
            "virtualmachines",
            {
                "apiVersion": "kubevirt.io/v1",
                "kind": "VirtualMachine",
                "metadata": {"name": "vm"},
                "spec": {"template": {"spec": {"volumes": list(volumes)}}},
            },
        )

    async def sync(self) -> Any:
        return await self.ctl.reconcile("ns/exp")

    def status(self) -> dict[str, Any]:
        result: dict[str, Any] = self.api.obj("virtualmachineexports", "exp").get("status") or {}
        return result

    def condition(self, kind: str) -> dict[str, Any]:
        (found,) = [c for c in self.status()["conditions"] if c["type"] == kind]
        return cast(dict[str, Any], found)

    def pod(self) -> Any:
        return self.api.obj("pods", "virt-export-exp")

    def make_pod_ready(self) -> None:
        pod = self.pod()
        pod["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
        self.api.put("pods", pod)


async def test_pvc_source_gets_service_token_cert_and_exporter_pod() -> None:
    rig = Rig()
    rig.claim()
    rig.export()
    result = await rig.sync()

    service = rig.api.obj("services", "virt-export-exp")
    assert service["spec"]["ports"] == [
        {"name": "export", "protocol": "TCP", "port": 443, "targetPort": 8443}
    ]
    assert service["spec"]["selector"] == {ex.SERVICE_LABEL: "exp"}
    token = rig.api.obj("secrets", "export-token-exp")
    assert token["stringData"] == {"token": "s3cret-token"}
    assert token["metadata"]["ownerReferences"][0]["uid"] == "export-uid"
    tls = rig.api.obj("secrets", "virt-export-cert-exp")
    assert tls["type"] == "kubernetes.io/tls"
    assert rig.certs == [
        [
            "virt-export-exp.ns.svc",
            "virt-export-exp.ns",
            "virt-export-exp",
            "virt-export-exp.ns.svc.cluster.local",
        ]
    ]

    pod = rig.pod()
    (container,) = pod["spec"]["containers"]
    assert container["image"] == "registry.local/virt-exportserver:t"
    assert {"name": "volume0", "mountPath": "/export-volumes/disk", "readOnly": True} in container[
        "volumeMounts"
    ]
    assert {
        "name": "volume0",
        "persistentVolumeClaim": {"claimName": "disk", "readOnly": True},
    } in pod["spec"]["volumes"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["VOLUME0_EXPORT_PATH"] == "/export-volumes/disk"
    assert env["VOLUME0_EXPORT_RAW_URI"] == "/volumes/disk/disk.img"
    assert env["VOLUME0_EXPORT_RAW_GZIP_URI"] == "/volumes/disk/disk.img.gz"
    assert env["TOKEN_FILE"] == "/token/token"
    assert env["DEADLINE"] == "2026-01-01T02:00:00Z"
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    assert pod["metadata"]["ownerReferences"][0]["kind"] == "VirtualMachineExport"
    assert pod["metadata"]["annotations"][ex.CERT_ANNOTATION].startswith("CERT for")

    status = rig.status()
    assert status["phase"] == "Pending"
    assert status["serviceName"] == "virt-export-exp"
    assert status["tokenSecretRef"] == "export-token-exp"
    assert status["ttlExpirationTime"] == "2026-01-01T02:00:00Z"
    assert rig.condition("Ready")["reason"] == "PodPending"
    assert rig.condition("PVCReady")["status"] == "True"
    assert rig.condition("PVCReady")["reason"] == "PVCBound"
    assert "links" not in status
    # Requeued at the TTL's end.
    assert result.requeue_after == pytest.approx(7200.0)


async def test_ready_pod_makes_export_ready_with_upstreams_links() -> None:
    rig = Rig()
    rig.claim()
    rig.export()
    await rig.sync()
    rig.make_pod_ready()
    await rig.sync()

    status = rig.status()
    assert status["phase"] == "Ready"
    assert rig.condition("Ready") | {"lastTransitionTime": None} == {
        "type": "Ready",
        "status": "True",
        "reason": "PodReady",
        "lastProbeTime": None,
        "lastTransitionTime": None,
    }
    internal = status["links"]["internal"]
    assert internal["cert"].startswith("CERT for virt-export-exp.ns.svc")
    assert internal["volumes"] == [
        {
            "name": "disk",
            "formats": [
                {"format": "raw", "url": "https://virt-export-exp.ns.svc/volumes/disk/disk.img"},
                {
                    "format": "gzip",
                    "url": "https://virt-export-exp.ns.svc/volumes/disk/disk.img.gz",
                },
            ],
        }
    ]


async def test_status_is_written_only_when_changed() -> None:
    rig = Rig()
    rig.claim()
    rig.export()
    await rig.sync()
    rig.make_pod_ready()
    await rig.sync()
    before = list(rig.api.writes)
    await rig.sync()
    assert rig.api.writes == before  # nothing changed: no write, not even a create tried


async def test_missing_pvc_is_pending_pvc_not_found_and_nothing_is_made() -> None:
    rig = Rig()
    rig.export()
    await rig.sync()
    assert rig.status()["phase"] == "Pending"
    assert rig.condition("PVCReady")["reason"] == "PVCNotFound"
    assert rig.condition("PVCReady")["message"] == "PersistentVolumeClaim ns/disk not found"
    assert rig.pod() is None
    assert rig.api.obj("secrets", "export-token-exp") is None
    assert "tokenSecretRef" not in rig.status()


async def test_pvc_used_by_another_pod_is_in_use_and_pauses_a_running_exporter() -> None:
    rig = Rig()
    rig.claim()
    rig.export()
    await rig.sync()
    rig.make_pod_ready()
    await rig.sync()
    assert rig.status()["phase"] == "Ready"
    rig.api.put(
        "pods",
        {
            "metadata": {"name": "virt-launcher-vm-abcde"},
            "spec": {"volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "disk"}}]},
            "status": {"phase": "Running"},
        },
    )
    result = await rig.sync()
    assert rig.pod() is None  # the exporter goes while someone else uses the claim
    assert rig.status()["phase"] == "Pending"
    assert "links" not in rig.status()  # stale links are removed, not left behind
    ready = rig.condition("Ready")
    assert ready["reason"] == "InUse"
    assert "virt-launcher-vm-abcde" in ready["message"]
    assert result.requeue_after == 3.0


async def test_pvc_not_bound_is_pending() -> None:
    rig = Rig()
    rig.claim(phase="Pending")
    rig.export()
    await rig.sync()
    assert rig.condition("PVCReady")["reason"] == "PVCPending"
    assert rig.condition("Ready")["reason"] == "PVCPending"
    assert rig.pod() is None


async def test_block_pvc_is_a_device_not_a_mount() -> None:
    rig = Rig()
    rig.claim(name="raw.disk", mode="Block")
    rig.export(source="raw.disk")
    await rig.sync()
    (container,) = rig.pod()["spec"]["containers"]
    assert container["volumeDevices"] == [
        {"name": "volume0", "devicePath": "/dev/export-volumes/raw-disk"}
    ]
    assert all(m["name"] != "volume0" for m in container["volumeMounts"])


async def test_claims_named_like_the_secret_volumes_do_not_clash() -> None:
    rig = Rig()
    rig.claim("token")
    rig.export(source="token")
    await rig.sync()
    names = [v["name"] for v in rig.pod()["spec"]["volumes"]]
    assert len(names) == len(set(names)), names
    (container,) = rig.pod()["spec"]["containers"]
    assert {"name": "volume0", "mountPath": "/export-volumes/token", "readOnly": True} in (
        container["volumeMounts"]
    )


async def test_vm_with_only_container_disk_and_cloud_init_is_skipped() -> None:
    rig = Rig()
    rig.vm(
        {"name": "root", "containerDisk": {"image": "x"}},
        {"name": "ci", "cloudInitNoCloud": {"userData": "#cloud-config"}},
    )
    rig.export(kind="VirtualMachine", source="vm")
    await rig.sync()
    status = rig.status()
    assert status["phase"] == "Skipped"
    assert status["virtualMachineName"] == "vm"
    assert rig.condition("Ready")["status"] == "False"
    assert rig.condition("Ready")["reason"] == "VMNoVolumes"
    assert rig.condition("Ready")["message"] == "Virtual Machine ns/vm has no volumes"
    assert rig.pod() is None


async def test_missing_vm_is_pending_vm_not_found() -> None:
    rig = Rig()
    rig.export(kind="VirtualMachine", source="vm")
    await rig.sync()
    assert rig.status()["phase"] == "Pending"
    assert rig.condition("Ready")["reason"] == "VMNotFound"


async def test_running_vm_is_in_use_then_stopped_vm_is_exported() -> None:
    rig = Rig()
    rig.claim("root-disk")
    rig.claim("data")
    rig.vm(
        {"name": "root", "persistentVolumeClaim": {"claimName": "root-disk"}},
        {"name": "data", "dataVolume": {"name": "data"}},
        {"name": "ci", "cloudInitNoCloud": {"userData": "x"}},
    )
    rig.api.put(
        "virtualmachineinstances", {"metadata": {"name": "vm"}, "status": {"phase": "Running"}}
    )
    rig.export(kind="VirtualMachine", source="vm")
    await rig.sync()
    assert rig.condition("Ready")["reason"] == "InUse"
    assert rig.condition("Ready")["message"] == "Virtual Machine ns/vm is running"
    assert rig.pod() is None

    # The VMI ends: its event enqueues the export, which now gets its exporter.
    rig.api.remove("virtualmachineinstances", "vm")
    rig.api.put(
        "virtualmachineinstances", {"metadata": {"name": "vm"}, "status": {"phase": "Succeeded"}}
    )
    assert "ns/exp" in await _drain(rig.ctl.queue)
    await rig.sync()
    env = {e["name"]: e["value"] for e in rig.pod()["spec"]["containers"][0]["env"]}
    assert env["VOLUME0_EXPORT_PATH"] == "/export-volumes/root-disk"
    assert env["VOLUME1_EXPORT_PATH"] == "/export-volumes/data"
    rig.make_pod_ready()
    await rig.sync()
    names = [v["name"] for v in rig.status()["links"]["internal"]["volumes"]]
    assert names == ["root-disk", "data"]


async def test_snapshot_source_is_refused_with_a_reason_naming_the_field() -> None:
    rig = Rig()
    rig.export(kind="VirtualMachineSnapshot", source="snap")
    await rig.sync()
    ready = rig.condition("Ready")
    assert ready["reason"] == "UnsupportedSource"
    assert ready["message"].startswith("spec.source: VirtualMachineSnapshot (snapshot.kubevirt.io)")
    assert rig.status()["phase"] == "Pending"


async def test_user_token_secret_is_used_not_generated() -> None:
    rig = Rig()
    rig.claim()
    rig.export(tokenSecretRef="mine")
    await rig.sync()
    assert rig.api.obj("secrets", "export-token-exp") is None
    assert rig.status()["tokenSecretRef"] == "mine"
    token_volume = [v for v in rig.pod()["spec"]["volumes"] if v["name"] == "token"]
    assert token_volume == [{"name": "token", "secret": {"secretName": "mine"}}]


async def test_ttl_expiry_deletes_the_export() -> None:
    rig = Rig()
    rig.claim()
    rig.export(ttlDuration="1m")
    result = await rig.sync()
    assert result.requeue_after == pytest.approx(60.0)
    assert rig.status()["ttlExpirationTime"] == "2026-01-01T00:01:00Z"
    await rig.clock.advance(60.0)
    await rig.sync()
    assert rig.api.obj("virtualmachineexports", "exp") is None
    assert ("delete", "virtualmachineexports", "exp") in rig.api.writes


async def test_invalid_ttl_is_not_reconciled() -> None:
    rig = Rig()
    rig.claim()
    rig.export(ttlDuration="two hours")
    assert await rig.sync() is None
    assert rig.api.writes == []


async def test_ended_exporter_pod_is_replaced() -> None:
    rig = Rig()
    rig.claim()
    rig.export()
    await rig.sync()
    pod = rig.pod()
    pod["status"] = {"phase": "Failed"}
    rig.api.put("pods", pod)
    await rig.sync()
    assert rig.pod() is None
    await rig.sync()
    assert rig.pod() is not None
    # A new certificate for the new pod: the TLS Secret's data is replaced.
    assert len(rig.certs) == 2
    assert ("patch", "secrets", "virt-export-cert-exp") in rig.api.writes


async def test_someone_elses_pod_of_the_exporters_name_is_left_alone() -> None:
    rig = Rig()
    rig.claim()
    rig.api.put(
        "pods",
        {
            "metadata": {
                "name": "virt-export-exp",
                "ownerReferences": [{"kind": "Other", "uid": "x", "controller": True}],
            },
            "status": {"phase": "Failed"},
        },
    )
    rig.export()
    await rig.sync()
    assert ("delete", "pods", "virt-export-exp") not in rig.api.writes


async def test_claim_and_vm_events_enqueue_their_exports() -> None:
    rig = Rig()
    rig.export(kind="VirtualMachine", source="vm")
    queued = await _drain(rig.ctl.queue)
    assert queued == ["ns/exp"]
    rig.vm({"name": "root", "persistentVolumeClaim": {"claimName": "root-disk"}})
    assert await _drain(rig.ctl.queue) == ["ns/exp"]
    rig.claim("root-disk")
    assert await _drain(rig.ctl.queue) == ["ns/exp"]
    rig.claim("unrelated")
    assert await _drain(rig.ctl.queue) == []


async def _drain(queue: WorkQueue[str]) -> list[str]:
    keys = []
    while len(queue):
        item = await queue.get()
        keys.append(item)
        queue.done(item)
    return keys


def test_self_signed_cert_names_the_service_and_is_its_own_anchor() -> None:
    cert = self_signed(["virt-export-exp.ns.svc", "virt-export-exp"], START, dt.timedelta(hours=3))
    parsed = x509.load_pem_x509_certificate(cert.cert_pem.encode())
    sans = parsed.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == ["virt-export-exp.ns.svc", "virt-export-exp"]
    assert parsed.not_valid_after_utc == START + dt.timedelta(hours=3)
    # An SSL context accepts it as a trust anchor (what a client given status.links does).
    context = ssl.create_default_context(cadata=cert.cert_pem)
    assert context.cert_store_stats()["x509_ca"] == 1
    assert "PRIVATE KEY" in cert.key_pem


def test_a_service_name_longer_than_a_common_name_stays_in_the_san() -> None:
    # Namespaces are up to 63 characters: the Service's DNS name then passes X.509's
    # 64-character CN limit (what the e2e tier's long test namespaces hit).
    long_name = f"virt-export-exp-raw.{'n' * 55}.svc"
    cert = self_signed([long_name, "virt-export-exp-raw"], START, dt.timedelta(hours=3))
    parsed = x509.load_pem_x509_certificate(cert.cert_pem.encode())
    sans = parsed.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == [long_name, "virt-export-exp-raw"]
    (common,) = parsed.subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)
    assert common.value == "virt-export-exp-raw"
