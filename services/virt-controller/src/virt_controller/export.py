"""The VirtualMachineExport controller (export.kubevirt.io): serve a stopped VM's or a
PVC's disks over HTTPS from an exporter pod, for a token, until the TTL ends.

Per export, as upstream: a Service `virt-export-<name>` (443 -> 8443); once the source is
available, a token Secret `export-token-<name>` (unless spec.tokenSecretRef names one), a
TLS Secret and the exporter pod `virt-export-<name>` mounting the claims read-only; the pod
goes when the source is in use again or the pod has ended. Status: phase, Ready and
PVCReady conditions, serviceName, tokenSecretRef, ttlExpirationTime and, once the pod is
ready, links.internal. At the TTL's end the export is deleted (its objects go with it:
they are all owned by it).
"""

from __future__ import annotations

import datetime as dt
import secrets
from collections.abc import Callable, Iterable
from typing import Any

import structlog
from kube_runtime import (
    PODS,
    SECRETS,
    SERVICES,
    ApiError,
    Event,
    EventRecorder,
    KubeClient,
    RawObject,
    Result,
    SharedInformer,
    WorkQueue,
)
from kubevirt_api import exports as ex
from kubevirt_api.resources import VIRTUAL_MACHINE_EXPORTS

from .exportcert import ServerCert, self_signed
from .exportspec import (
    EXPORT_KIND,
    Source,
    cert_secret,
    claim_users,
    expiration,
    export_status,
    exporter_pod,
    exporter_service,
    pvc_source,
    source_ref,
    token_secret,
    ttl_seconds,
    unsupported_source,
    vm_claims,
    vm_source,
)
from .objects import controller_owner, deleting, key, meta, phase, uid
from .writes import patch_status_if_changed

__all__ = ["EXPORT_SOURCE_INDEX", "ExportController", "index_by_export_source"]

log = structlog.get_logger(__name__)

#: Exports by `<namespace>/<kind>/<name>` of their source (claims and VMs find theirs).
EXPORT_SOURCE_INDEX = "export-source"
#: Re-check an unavailable source this often (upstream's requeue time), besides events.
RECHECK = 3.0
#: A token of 20 URL-safe characters, as upstream's length.
TOKEN_BYTES = 15


def index_by_export_source(obj: RawObject) -> Iterable[str]:
    ref = source_ref(obj)
    return (f"{meta(obj).get('namespace')}/{ref.kind}/{ref.name}",) if ref.name else ()


def _token() -> str:
    return secrets.token_urlsafe(TOKEN_BYTES)


class ExportController:
    """Reconciles VirtualMachineExports by key. `pods` and `services` hold the exporters'
    (label kubevirt.io=virt-exporter); `claims`, `vms`, `vmis` are looked up by key; the
    pods that may use a claim are listed live (`list_pods`), only for PVC sources."""

    def __init__(
        self,
        client: KubeClient,
        exports: SharedInformer[RawObject],
        pods: SharedInformer[RawObject],
        services: SharedInformer[RawObject],
        claims: SharedInformer[RawObject],
        vms: SharedInformer[RawObject],
        vmis: SharedInformer[RawObject],
        queue: WorkQueue[str],
        *,
        image: Callable[[], tuple[str, str]],
        recorder: EventRecorder | None = None,
        make_cert: Callable[[list[str], dt.datetime, dt.timedelta], ServerCert] = self_signed,
        make_token: Callable[[], str] = _token,
    ) -> None:
        self.client = client
        self.exports = exports
        self.pods = pods
        self.services = services
        self.claims = claims
        self.vms = vms
        self.vmis = vmis
        self.queue = queue
        #: (exporter image, pull policy), read when a pod is made.
        self.image = image
        self.recorder = recorder
        self.make_cert = make_cert
        self.make_token = make_token

    # -- informer handlers: they only enqueue exports ------------------------------------

    def on_export(self, event: Event[RawObject]) -> None:
        self.queue.add(event.key)

    def on_owned(self, event: Event[RawObject]) -> None:
        """An exporter pod or Service: its controlling export."""
        ref = controller_owner(event.raw)
        if ref is not None and ref.get("kind") == EXPORT_KIND:
            self.queue.add(f"{meta(event.raw).get('namespace')}/{ref.get('name')}")

    def _by_source(self, namespace: object, kind: str, name: object) -> None:
        for export in self.exports.store.by_index(
            EXPORT_SOURCE_INDEX, f"{namespace}/{kind}/{name}"
        ):
            self.queue.add(key(export))

    def on_claim(self, event: Event[RawObject]) -> None:
        m = meta(event.raw)
        self._by_source(m.get("namespace"), "PersistentVolumeClaim", m.get("name"))
        # A VM source's claims: exports of VMs in the namespace naming this claim.
        for export in self.exports.store.objects():
            ref = source_ref(export)
            if ref.is_vm and meta(export).get("namespace") == m.get("namespace"):
                vm = self.vms.get_raw(f"{m.get('namespace')}/{ref.name}")
                if vm is not None and m.get("name") in vm_claims(vm):
                    self.queue.add(key(export))

    def on_vm(self, event: Event[RawObject]) -> None:
        m = meta(event.raw)
        self._by_source(m.get("namespace"), "VirtualMachine", m.get("name"))

    def on_vmi(self, event: Event[RawObject]) -> None:
        # A VMI is named as its VM; its start or end makes a VM source busy or free.
        m = meta(event.raw)
        self._by_source(m.get("namespace"), "VirtualMachine", m.get("name"))

    # -- reconcile -----------------------------------------------------------------------

    async def reconcile(self, export_key: str) -> Result | None:
        export = self.exports.get_raw(export_key)
        if export is None or deleting(export):
            return None
        now = self.queue.clock.now()
        try:
            ttl = ttl_seconds(export)
        except ValueError as exc:
            # The CRD's schema admits any string; say which field is wrong and stop.
            log.error("export not reconciled", export=export_key, error=str(exc))
            await self._event(export, "Warning", "InvalidSpec", str(exc))
            return None
        expires = expiration(export, ttl)
        if expires is not None and now >= expires:
            await self._delete_expired(export)
            return None

        service = await self._ensure_service(export)
        source = await self._source(export)
        token_ref = self._token(export, source)
        pod = await self._exporter(export, source, token_ref, expires or now)
        wanted = export_status(
            export,
            source,
            pod,
            service_name=service,
            token_secret_ref=token_ref,
            expires=expires,
            now=now,
        )
        await patch_status_if_changed(self.client, VIRTUAL_MACHINE_EXPORTS, export, wanted)
        delays = [] if expires is None else [(expires - now).total_seconds()]
        if not source.available and not source.skipped and source.claims:
            delays.append(RECHECK)
        return Result(requeue_after=min(delays)) if delays else None

    async def _event(self, export: RawObject, type_: Any, reason: str, message: str) -> None:
        if self.recorder is not None:
            await self.recorder.event(export, type_, reason, message)

    async def _delete_expired(self, export: RawObject) -> None:
        m = meta(export)
        try:
            await self.client.delete(
                VIRTUAL_MACHINE_EXPORTS, str(m["name"]), str(m["namespace"]), uid=uid(export)
            )
        except ApiError as exc:
            if not (exc.not_found or exc.conflict):
                raise
        log.info("export deleted at the end of its TTL", export=key(export))

    async def _ensure_service(self, export: RawObject) -> str:
        body = exporter_service(export)
        name = str(body["metadata"]["name"])
        existing = self.services.get_raw(f"{meta(export).get('namespace')}/{name}")
        if existing is None:
            try:
                await self.client.create(SERVICES, body)
            except ApiError as exc:
                if not exc.conflict:
                    raise
            else:
                await self._event(export, "Normal", "ServiceCreated", f"Created service {name}")
        return name

    async def _source(self, export: RawObject) -> Source:
        ref = source_ref(export)
        namespace = str(meta(export).get("namespace"))
        if ref.is_pvc:
            claim = self.claims.get_raw(f"{namespace}/{ref.name}")
            users: list[str] = []
            if claim is not None:
                listed = await self.client.list(PODS, namespace)
                users = claim_users(listed.get("items") or (), ref.name, uid(export))
            return pvc_source(namespace, ref.name, claim, users)
        if ref.is_vm:
            vm = self.vms.get_raw(f"{namespace}/{ref.name}")
            claims: dict[str, RawObject | None] = {}
            if vm is not None:
                claims = {c: self.claims.get_raw(f"{namespace}/{c}") for c in vm_claims(vm)}
            vmi = self.vmis.get_raw(f"{namespace}/{ref.name}")
            return vm_source(namespace, ref.name, vm, claims, vmi)
        return unsupported_source(ref)

    def _token(self, export: RawObject, source: Source) -> str | None:
        """The token Secret's name: the user's, or ours once the source is available (made
        with the exporter pod, which needs it)."""
        spec_ref = (export.get("spec") or {}).get("tokenSecretRef")
        if isinstance(spec_ref, str) and spec_ref:
            return spec_ref
        if not source.available or not source.claims:
            status_ref = (export.get("status") or {}).get("tokenSecretRef")
            return status_ref if isinstance(status_ref, str) else None
        return ex.token_secret_name(str(meta(export).get("name")))

    async def _ensure_token(self, export: RawObject, name: str) -> None:
        """Create our token Secret (an existing one is kept: its token may be in use)."""
        spec_ref = (export.get("spec") or {}).get("tokenSecretRef")
        if isinstance(spec_ref, str) and spec_ref:
            return  # the user's, managed by the user
        try:
            await self.client.create(SECRETS, token_secret(export, name, self.make_token()))
        except ApiError as exc:
            if not exc.conflict:
                raise
        else:
            await self._event(export, "Normal", "SecretCreated", f"Created default secret {name}")

    async def _exporter(
        self, export: RawObject, source: Source, token_ref: str | None, deadline: dt.datetime
    ) -> RawObject | None:
        m = meta(export)
        pod_key = f"{m.get('namespace')}/{ex.exporter_name(str(m.get('name')))}"
        pod = self.pods.get_raw(pod_key)
        owner = controller_owner(pod) if pod is not None else None
        if owner is None or owner.get("uid") != uid(export):
            pod = None  # none, or someone else's pod of that name: never ours to touch
        if pod is None:
            if not source.available or not source.claims or token_ref is None:
                return None
            return await self._create_exporter(export, source, token_ref, deadline)
        if deleting(pod):
            return pod
        if not source.available:
            await self._delete_pod(export, pod, "ExportPaused", source.ready.message)
            return None
        if phase(pod) in ("Succeeded", "Failed"):
            message = f"Exporter pod {pod_key} is in phase {phase(pod)}"
            await self._delete_pod(export, pod, "ExporterPodFailedOrCompleted", message)
            return None
        return pod

    async def _create_exporter(
        self, export: RawObject, source: Source, token_ref: str, deadline: dt.datetime
    ) -> RawObject:
        m = meta(export)
        name, namespace = str(m.get("name")), str(m.get("namespace"))
        service = ex.exporter_name(name)
        now = self.queue.clock.now()
        # Valid a little past the deadline, so a clock a few seconds off still trusts it.
        lifetime = max(deadline - now, dt.timedelta(0)) + dt.timedelta(hours=1)
        names = [ex.internal_host(name, namespace), f"{service}.{namespace}", service]
        cert = self.make_cert([*names, f"{service}.{namespace}.svc.cluster.local"], now, lifetime)
        await self._ensure_token(export, token_ref)
        await self._put_cert_secret(export, cert)
        image, pull_policy = self.image()
        body = exporter_pod(
            export,
            source.claims,
            image=image,
            pull_policy=pull_policy,
            token_secret_name=token_ref,
            cert_pem=cert.cert_pem,
            deadline=deadline,
        )
        try:
            created: RawObject = await self.client.create(PODS, body)
        except ApiError as exc:
            if not exc.conflict:
                raise
            return body  # the informer shows the one that exists soon; status stays Pending
        await self._event(
            export, "Normal", "ExporterPodCreated", f"Created exporter pod {namespace}/{service}"
        )
        return created

    async def _put_cert_secret(self, export: RawObject, cert: ServerCert) -> None:
        """Create the TLS Secret, or replace its data (a new pod gets a new certificate)."""
        body = cert_secret(export, cert.cert_pem, cert.key_pem)
        try:
            await self.client.create(SECRETS, body)
        except ApiError as exc:
            if not exc.conflict:
                raise
            m = body["metadata"]
            await self.client.merge_patch(
                SECRETS, m["name"], {"stringData": body["stringData"]}, m["namespace"]
            )

    async def _delete_pod(
        self, export: RawObject, pod: RawObject, reason: str, message: str
    ) -> None:
        await self._event(export, "Warning", reason, message)
        m = meta(pod)
        try:
            await self.client.delete(PODS, str(m["name"]), str(m["namespace"]), uid=uid(pod))
        except ApiError as exc:
            if not (exc.not_found or exc.conflict):
                raise
