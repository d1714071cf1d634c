"""One pass over the KubeVirt CR: install or upgrade in upstream's order, report status,
and on deletion remove everything installed (`pkg/virt-operator/kubevirt.go`, level-
triggered: a pass that must wait returns early and asks to be requeued).

Create order: strategy ConfigMap, CRDs, RBAC, Services, certificates, webhooks and
APIServices (with the CA bundle), virt-api → (ready) → virt-controller, virt-handler.
Update order (target install ≠ observed): virt-handler → (ready) → virt-controller →
(ready) → virt-api.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from kube_runtime import CONFIGMAPS, ApiError, JsonPatchOp, Resource, Result
from kubevirt_api.resources import KUBEVIRTS
from service_kit import get_logger

from .apply import Api, Applier, LiveObjects
from .certificates import (
    CA_NAME,
    KeyPair,
    RotationPolicy,
    issue_ca,
    issue_leaf,
    leaf_specs,
    needs_renewal,
    signed_by,
)
from .patches import PatchError
from .readiness import why_not_ready
from .resources import MANAGED
from .resources import SECRETS as _SECRETS
from .status import Condition, State, conditions_for, merge_conditions
from .strategy import InstallSpec, Strategy, render
from .wellknown import (
    FINALIZER,
    IDENTIFIER_ANNOTATION,
    INSTALL_STRATEGY_LABEL,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    ConditionType,
    Phase,
    Reason,
)

__all__ = ["KubeVirtReconciler", "ManagedCache", "OperatorIdentity"]

log = get_logger(__name__)

#: How often a settled install is looked at again (certificate renewal, drift in kinds
#: whose events were missed); waiting passes come back sooner.
RESYNC_SECONDS = 10.0
WAIT_SECONDS = 2.0
HANDLER_CLIENT_CA = "kubevirt-virt-handler-client-ca"


@dataclass(frozen=True, slots=True)
class OperatorIdentity:
    """The operator's own image coordinates: the default registry and tag it installs."""

    registry: str
    tag: str
    #: status.operatorVersion.
    version: str


class ManagedCache(LiveObjects, Protocol):
    """The live cache, also listing every managed object of a kind (for removal)."""

    def managed(self, resource: Resource) -> list[Mapping[str, Any]]: ...


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _status(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    status = obj.get("status")
    return status if isinstance(status, Mapping) else {}


def _now_text(now: datetime.datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


def _secret(name: str, namespace: str, data: Mapping[str, bytes], tls: bool) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls" if tls else "Opaque",
        "metadata": {"name": name, "namespace": namespace},
        "data": {k: base64.b64encode(v).decode() for k, v in data.items()},
    }


def _secret_bytes(obj: Mapping[str, Any] | None, key: str) -> bytes:
    data = (obj or {}).get("data") or {}
    value = data.get(key)
    return base64.b64decode(value) if isinstance(value, str) else b""


class KubeVirtReconciler:
    """Reconciles one KubeVirt CR by key (`namespace/name`)."""

    def __init__(
        self,
        api: Api,
        live: ManagedCache,
        kubevirts: Callable[[], Sequence[Mapping[str, Any]]],
        identity: OperatorIdentity,
        *,
        now: Callable[[], datetime.datetime] | None = None,
    ) -> None:
        self.api = api
        self.live = live
        self.kubevirts = kubevirts
        self.identity = identity
        self.now = now or (lambda: datetime.datetime.now(datetime.UTC))
        self.applier = Applier(api, live)

    # -- the pass ---------------------------------------------------------------------

    def _find(self, key: str) -> Mapping[str, Any] | None:
        for kv in self.kubevirts():
            meta = _meta(kv)
            if f"{meta.get('namespace')}/{meta.get('name')}" == key:
                return kv
        return None

    def _other_active(self, kv: Mapping[str, Any]) -> bool:
        """Another, older KubeVirt CR owns the install (upstream's checkForActiveInstall)."""
        mine = _meta(kv)
        for other in self.kubevirts():
            meta = _meta(other)
            if meta.get("uid") == mine.get("uid") or meta.get("deletionTimestamp"):
                continue
            older = (str(meta.get("creationTimestamp")), str(meta.get("name"))) < (
                str(mine.get("creationTimestamp")),
                str(mine.get("name")),
            )
            if older:
                return True
        return False

    async def reconcile(self, key: str) -> Result | None:
        kv = self._find(key)
        if kv is None:
            return None
        if _meta(kv).get("deletionTimestamp"):
            return await self._sync_deletion(kv)
        if self._other_active(kv):
            await self._write_status(
                kv,
                {},
                [
                    Condition(
                        ConditionType.SYNCHRONIZED.value,
                        "False",
                        Reason.EXISTING_DEPLOYMENT.value,
                        "There is an active KubeVirt deployment",
                    )
                ],
            )
            return None
        await self._ensure_finalizer(kv)
        try:
            spec = InstallSpec.from_kubevirt(
                kv, registry=self.identity.registry, tag=self.identity.tag
            )
            # Rendering the first time costs seconds (the CRDs' schemas): off the loop.
            strategy = await asyncio.to_thread(render, spec)
        except PatchError as exc:
            return await self._failed(kv, str(exc))
        try:
            return await self._sync_installation(kv, strategy)
        except ApiError as exc:
            if exc.status in (400, 403, 422):
                await self._failed(kv, str(exc))
            raise

    async def _failed(self, kv: Mapping[str, Any], error: str) -> Result:
        spec = InstallSpec.from_kubevirt(kv, registry=self.identity.registry, tag=self.identity.tag)
        conditions = conditions_for(
            State.FAILED,
            created=False,
            target_version=spec.version,
            target_registry=spec.registry,
            error=error,
        )
        await self._write_status(kv, {"phase": Phase.DEPLOYING.value}, conditions)
        return Result(requeue_after=RESYNC_SECONDS)

    async def _set_finalizers(self, kv: Mapping[str, Any], finalizers: list[str]) -> None:
        """Replace metadata.finalizers if they are still what `kv` shows (a test op, not
        the resourceVersion: status writes in between must not make it fail)."""
        meta = _meta(kv)
        current = list(meta.get("finalizers") or [])
        path = "/metadata/finalizers"
        ops: list[JsonPatchOp] = (
            [
                {"op": "test", "path": path, "value": current},
                {"op": "replace", "path": path, "value": finalizers},
            ]
            if current
            else [{"op": "add", "path": path, "value": finalizers}]
        )
        await self.api.json_patch(KUBEVIRTS, str(meta["name"]), ops, str(meta["namespace"]))

    async def _ensure_finalizer(self, kv: Mapping[str, Any]) -> None:
        finalizers = list(_meta(kv).get("finalizers") or [])
        if FINALIZER not in finalizers:
            await self._set_finalizers(kv, [*finalizers, FINALIZER])

    async def _sync_installation(self, kv: Mapping[str, Any], strategy: Strategy) -> Result:
        spec = strategy.spec
        status = _status(kv)
        observed_id = str(status.get("observedDeploymentID") or "")
        updating = bool(observed_id) and observed_id != spec.identifier
        ensure = self.applier.ensure_all
        written = int(await self.applier.ensure(strategy.config_map))
        written += await ensure(strategy.crds)
        written += await ensure(strategy.rbac)
        written += await ensure(strategy.services)
        bundle = await self._ensure_certificates(kv, spec)
        written += await ensure(strategy.registrations(bundle))
        stamp = spec.stamp()
        order = (
            [strategy.virt_handler, strategy.virt_controller, strategy.virt_api]
            if updating
            else [strategy.virt_api, strategy.virt_controller, strategy.virt_handler]
        )
        # Create path: virt-controller and virt-handler together once virt-api is ready;
        # update path: one component at a time, each waiting for the one before.
        gates = (True, True, True) if updating else (True, False, True)
        waiting = ""
        for workload, gate in zip(order, gates, strict=True):
            # Behind a component that is not ready yet: an update leaves the next one at
            # the old version; an install creates nothing new, but puts back what exists.
            if waiting and (updating or self.applier.current(workload) is None):
                continue
            written += await self.applier.ensure(workload)
            why = why_not_ready(self.applier.current(workload), stamp)
            if why and gate and not waiting:
                waiting = f"{workload['kind']} {workload['metadata']['name']}: {why}"
        all_created = all(self.applier.current(w) is not None for w in order)
        ready = all_created and all(
            not why_not_ready(self.applier.current(w), stamp) for w in strategy.workloads()
        )
        if ready:
            await self._delete_old_strategies(spec)
        await self._report(kv, spec, updating=updating, created=all_created, ready=ready)
        if written:
            log.info("applied", objects=written, waiting=waiting or None)
        return Result(requeue_after=RESYNC_SECONDS if ready else WAIT_SECONDS)

    async def _delete_old_strategies(self, spec: InstallSpec) -> None:
        for cm in self.live.managed(CONFIGMAPS):
            meta = _meta(cm)
            labels = meta.get("labels") or {}
            annotations = meta.get("annotations") or {}
            if INSTALL_STRATEGY_LABEL not in labels:
                continue
            if annotations.get(IDENTIFIER_ANNOTATION) != spec.identifier:
                await self._delete(CONFIGMAPS, cm)

    # -- certificates -------------------------------------------------------------------

    async def _ensure_certificates(self, kv: Mapping[str, Any], spec: InstallSpec) -> bytes:
        """The CA and every leaf exist, signed by the CA and not due; returns the CA bundle
        (the current CA, and the previous one while leaves it signed may be in use)."""
        namespace = spec.namespace
        policy = RotationPolicy.from_kubevirt_spec(kv.get("spec") or {})
        now = self.now()
        live_ca = self.live.lookup(_SECRETS, namespace, CA_NAME)
        ca = KeyPair(_secret_bytes(live_ca, "tls.crt"), _secret_bytes(live_ca, "tls.key"))
        previous = b""
        if not ca.cert or not ca.key or needs_renewal(ca.cert, now, policy.ca_renew_before):
            previous = ca.cert
            ca = issue_ca(CA_NAME, now, policy.ca_duration)
            log.info("issued the CA", secret=CA_NAME)
        else:
            old_bundle = self.live.lookup(CONFIGMAPS, namespace, CA_NAME)
            text = str(((old_bundle or {}).get("data") or {}).get("ca-bundle") or "")
            previous = text.encode().replace(ca.cert, b"").strip()
            if previous:
                previous += b"\n"
        bundle = ca.cert + (previous if previous and not needs_renewal(previous, now, 0) else b"")
        objects = [
            _secret(CA_NAME, namespace, {"tls.crt": ca.cert, "tls.key": ca.key}, tls=True),
            self._config_map(CA_NAME, namespace, {"ca-bundle": bundle.decode()}),
            self._config_map(HANDLER_CLIENT_CA, namespace, {"ca.crt": bundle.decode()}),
        ]
        for leaf in leaf_specs(namespace):
            live = self.live.lookup(_SECRETS, namespace, leaf.secret)
            pair = KeyPair(_secret_bytes(live, "tls.crt"), _secret_bytes(live, "tls.key"))
            if (
                not pair.cert
                or not pair.key
                or not signed_by(pair.cert, ca.cert)
                or needs_renewal(pair.cert, now, policy.cert_renew_before)
            ):
                pair = issue_leaf(ca, leaf, now, policy.cert_duration)
                log.info("issued a certificate", secret=leaf.secret)
            data = {"tls.crt": pair.cert, "tls.key": pair.key}
            if leaf.with_ca:
                data["ca.crt"] = bundle
            objects.append(_secret(leaf.secret, namespace, data, tls=not leaf.with_ca))
        for obj in objects:
            meta = obj["metadata"]
            meta["labels"] = {MANAGED_BY_LABEL: MANAGED_BY}
            meta["annotations"] = spec.stamp()
        await self.applier.ensure_all(objects)
        return bundle

    @staticmethod
    def _config_map(name: str, namespace: str, data: Mapping[str, str]) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace},
            "data": dict(data),
        }

    # -- status -----------------------------------------------------------------------

    async def _report(
        self,
        kv: Mapping[str, Any],
        spec: InstallSpec,
        *,
        updating: bool,
        created: bool,
        ready: bool,
    ) -> None:
        status = _status(kv)
        fields: dict[str, Any] = {
            "operatorVersion": self.identity.version,
            "targetKubeVirtVersion": spec.version,
            "targetKubeVirtRegistry": spec.registry,
            "targetDeploymentID": spec.identifier,
        }
        if ready:
            state = State.READY
            fields.update(
                phase=Phase.DEPLOYED.value,
                observedKubeVirtVersion=spec.version,
                observedKubeVirtRegistry=spec.registry,
                observedDeploymentID=spec.identifier,
                observedGeneration=_meta(kv).get("generation"),
            )
        else:
            state = State.UPDATING if updating else State.DEPLOYING
            # As upstream: the phase is set once (Deploying) and then only to Deployed; a
            # component that goes unready later shows in the conditions, not the phase.
            fields["phase"] = status.get("phase") or Phase.DEPLOYING.value
        # Created stays once every object was created (upstream sets it and never unsets).
        created = created or any(
            isinstance(c, Mapping) and c.get("type") == "Created" and c.get("status") == "True"
            for c in status.get("conditions") or []
        )
        conditions = conditions_for(
            state,
            created=created,
            target_version=spec.version,
            target_registry=spec.registry,
            observed_version=str(status.get("observedKubeVirtVersion") or ""),
            observed_registry=str(status.get("observedKubeVirtRegistry") or ""),
        )
        await self._write_status(kv, fields, conditions)

    async def _write_status(
        self, kv: Mapping[str, Any], fields: Mapping[str, Any], conditions: list[Condition]
    ) -> None:
        """Merge-patch status with `fields` and `conditions`, only when something differs."""
        status = _status(kv)
        merged = merge_conditions(
            list(status.get("conditions") or []), conditions, _now_text(self.now())
        )
        patch: dict[str, Any] = {k: v for k, v in fields.items() if status.get(k) != v}
        if _thawed(status.get("conditions")) != merged:
            patch["conditions"] = merged
        if not patch:
            return
        meta = _meta(kv)
        await self.api.merge_patch(
            KUBEVIRTS,
            str(meta["name"]),
            {"status": patch},
            str(meta["namespace"]),
            subresource="status",
        )

    # -- deletion -----------------------------------------------------------------------

    async def _delete(self, resource: Resource, obj: Mapping[str, Any]) -> None:
        meta = _meta(obj)
        try:
            await self.api.delete(
                resource,
                str(meta["name"]),
                meta.get("namespace"),
                propagation="Background",
            )
        except ApiError as exc:
            if not exc.not_found:
                raise

    async def _sync_deletion(self, kv: Mapping[str, Any]) -> Result | None:
        meta = _meta(kv)
        if FINALIZER not in (meta.get("finalizers") or []):
            return None
        if _status(kv).get("phase") != Phase.DELETED.value:
            await self._write_status(
                kv,
                {"phase": Phase.DELETING.value},
                conditions_for(
                    State.DELETING, created=False, target_version="", target_registry=""
                ),
            )
        if not self._other_active(kv):
            remaining = 0
            for resource in MANAGED:
                for obj in self.live.managed(resource):
                    remaining += 1
                    if not _meta(obj).get("deletionTimestamp"):
                        await self._delete(resource, obj)
            if remaining:
                return Result(requeue_after=WAIT_SECONDS)
        await self._write_status(kv, {"phase": Phase.DELETED.value}, [])
        await self._set_finalizers(kv, [f for f in meta.get("finalizers") or [] if f != FINALIZER])
        log.info("uninstalled", kubevirt=meta.get("name"))
        return None


def _thawed(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _thawed(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_thawed(v) for v in value]
    return value
