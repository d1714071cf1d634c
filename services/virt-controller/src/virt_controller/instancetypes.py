"""A VM's instancetype and preference on sync: found, pinned in ControllerRevisions, applied.

Upstream's ``instancetype/controller/vm``: before the run strategy acts, every referenced
object must exist (else the sync fails with FailedFindInstancetype/FailedFindPreference);
each gets a ControllerRevision owned by the VM, named in ``status.*Ref``; the VMI is built
from those revisions, so a later edit of the object does not change the VM. Changing
the matchers of a running VM leaves its VMI alone and asks for a restart.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import structlog
from kube_runtime import CONTROLLER_REVISIONS, ApiError, KubeClient, Resource, get_or_none, thaw
from kubevirt_api import event_reasons
from kubevirt_api.defaults import DefaultsConfig, default_network_interface, default_volume_disks
from kubevirt_api.instancetypes import (
    CLUSTER_INSTANCETYPE_ANNOTATION,
    CLUSTER_PREFERENCE_ANNOTATION,
    INSTANCETYPE_ANNOTATION,
    PREFERENCE_ANNOTATION,
    TEMPLATE_SPEC,
    ConflictError,
    FoundSpecs,
    Matcher,
    NotFoundError,
    UnknownKindError,
    apply_auto_attach_preferences,
    apply_to_vmi_spec,
    controller_revision,
    find_object,
    find_specs,
    instancetype_matcher,
    preference_matcher,
    same_revision_data,
    set_matcher_annotations,
    synced_status_ref,
)

from .objects import mapping, meta

__all__ = [
    "FAILED_CREATE",
    "FAILED_FIND_INSTANCETYPE",
    "FAILED_FIND_PREFERENCE",
    "RESTART_REQUIRED_MESSAGE",
    "InstancetypeSync",
    "SyncFailedError",
    "SyncFailure",
    "SyncOutcome",
    "build_vmi",
    "conflict_message",
    "names_instancetypes",
    "restart_required",
]

log = structlog.get_logger(__name__)

FAILED_FIND_INSTANCETYPE: Final = "FailedFindInstancetype"
FAILED_FIND_PREFERENCE: Final = "FailedFindPreference"
FAILED_CREATE: Final = event_reasons.FAILED_CREATE  # a Failure condition reason too
RESTART_REQUIRED_MESSAGE: Final = "a non-live-updatable field was changed in the template spec"
_STORE_ERROR: Final = "error encountered while storing instancetype.kubevirt.io controllerRevisions"
_ANNOTATIONS: Final = (
    INSTANCETYPE_ANNOTATION,
    CLUSTER_INSTANCETYPE_ANNOTATION,
    PREFERENCE_ANNOTATION,
    CLUSTER_PREFERENCE_ANNOTATION,
)
_STATUS_REFS: Final = {"instancetype": "instancetypeRef", "preference": "preferenceRef"}
_CACHE_LIMIT: Final = 10000


@dataclass(frozen=True, slots=True)
class SyncFailure:
    """Why a VM cannot sync (a Failure condition's reason and message)."""

    reason: str
    message: str


class SyncFailedError(Exception):
    """Raised after the Failure condition is written, so the VM is retried with back-off
    (nothing else would bring it back: the instancetype kinds are not watched)."""

    def __init__(self, failure: SyncFailure) -> None:
        self.failure = failure
        super().__init__(f"{failure.reason}: {failure.message}")


@dataclass(frozen=True, slots=True)
class SyncOutcome:
    """What one sync found: the status refs to write, the specs to build from, or a failure."""

    refs: dict[str, Any] = field(default_factory=dict)
    specs: FoundSpecs | None = None
    failure: SyncFailure | None = None


def names_instancetypes(vm: Mapping[str, Any]) -> bool:
    """Whether the VM names an instancetype or a preference."""
    spec = mapping(vm.get("spec"))
    return spec.get("instancetype") is not None or spec.get("preference") is not None


class InstancetypeSync:
    """Finds and pins a VM's instancetype and preference through the API server."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        # Revisions never change once written (their names carry uid and generation).
        self._revisions: dict[tuple[str | None, str], Mapping[str, Any]] = {}

    async def _get(
        self, resource: Resource, name: str, namespace: str | None
    ) -> Mapping[str, Any] | None:
        key = (namespace, name)
        if resource == CONTROLLER_REVISIONS and key in self._revisions:
            return self._revisions[key]
        found = await get_or_none(self.client, resource, name, namespace)
        if found is None:
            return None
        if resource == CONTROLLER_REVISIONS:
            if len(self._revisions) > _CACHE_LIMIT:
                self._revisions.clear()
            self._revisions[key] = found
        return found

    async def sync(self, vm: Mapping[str, Any]) -> SyncOutcome:
        """Check the referenced objects exist, store their revisions, resolve the specs."""
        if not names_instancetypes(vm):
            return SyncOutcome()
        try:
            await find_specs(self._get, vm)
            matchers = [m for m in (instancetype_matcher(vm), preference_matcher(vm)) if m]
        except (NotFoundError, UnknownKindError) as error:
            preference = isinstance(error, NotFoundError) and error.preference
            reason = FAILED_FIND_PREFERENCE if preference else FAILED_FIND_INSTANCETYPE
            return SyncOutcome(failure=SyncFailure(reason, str(error)))
        status = mapping(vm.get("status"))
        refs: dict[str, Any] = {}
        try:
            for matcher in matchers:
                key = _STATUS_REFS[matcher.field]
                refs[key] = await self._store(vm, matcher, mapping(status.get(key)))
            specs = await find_specs(self._get, vm, {**thaw(status), **refs})
        except (NotFoundError, ConflictError, _RevisionMismatchError) as error:
            message = f"{_STORE_ERROR}: {error}"
            log.warning(
                "storing instancetype revisions failed", vm=meta(vm).get("name"), error=message
            )
            return SyncOutcome(failure=SyncFailure(FAILED_CREATE, message))
        changed = {k: v for k, v in refs.items() if thaw(status.get(k)) != v}
        return SyncOutcome(refs=changed, specs=specs)

    async def _store(
        self, vm: Mapping[str, Any], matcher: Matcher, current: Mapping[str, Any]
    ) -> dict[str, Any]:
        ref = synced_status_ref(matcher, current)
        if mapping(ref.get("controllerRevisionRef")).get("name"):
            return ref
        obj = await find_object(self._get, vm, matcher)
        if matcher.field == "instancetype":
            # The object may have changed since admission: check once more before pinning it.
            template = mapping(mapping(vm.get("spec")).get("template"))
            applied = apply_to_vmi_spec(
                TEMPLATE_SPEC,
                mapping(obj.get("spec")),
                None,
                mapping(template.get("spec")),
                mapping(mapping(template.get("metadata")).get("annotations")),
            )
            if applied.conflicts:
                raise ConflictError(applied.conflicts)
        revision = controller_revision(vm, obj)
        name = str(revision["metadata"]["name"])
        namespace = meta(vm).get("namespace")
        try:
            created = await self.client.create(CONTROLLER_REVISIONS, revision, namespace)
            self._revisions[(namespace, name)] = (
                created if isinstance(created, Mapping) else revision
            )
            log.info("stored instancetype revision", revision=name)
        except ApiError as error:
            if not error.conflict:
                raise
            existing = await self._get(CONTROLLER_REVISIONS, name, namespace)
            if existing is None or not same_revision_data(revision, existing):
                raise _RevisionMismatchError(name) from error
        ref["controllerRevisionRef"] = {"name": name}
        return ref


class _RevisionMismatchError(Exception):
    def __init__(self, name: str) -> None:
        super().__init__(f"found existing ControllerRevision with unexpected data: {name}")


def build_vmi(
    vm: Mapping[str, Any],
    specs: FoundSpecs,
    spec: dict[str, Any],
    annotations: dict[str, Any],
    defaults: DefaultsConfig,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The VMI spec and annotations of a VM with an instancetype or preference.

    Upstream's order: a disk for every volume without one, autoattach preferences, the
    default pod interface, then the instancetype and preference. Raises ConflictError.
    """
    default_volume_disks(spec)
    apply_auto_attach_preferences(specs.preference, spec)
    default_network_interface(spec, defaults)
    set_matcher_annotations(vm, annotations)
    applied = apply_to_vmi_spec("spec", specs.instancetype, specs.preference, spec, annotations)
    if applied.conflicts:
        raise ConflictError(applied.conflicts)
    return applied.spec, applied.annotations


def restart_required(vm: Mapping[str, Any], vmi: Mapping[str, Any] | None) -> bool:
    """Whether the running VMI was built from other instancetype/preference matchers."""
    if vmi is None:
        return False
    wanted: dict[str, Any] = {}
    try:
        set_matcher_annotations(vm, wanted)
    except UnknownKindError:
        return False
    running = mapping(meta(vmi).get("annotations"))
    return wanted != {k: running[k] for k in _ANNOTATIONS if k in running}


def conflict_message(error: ConflictError) -> str:
    """Upstream's text for a VMI that cannot take its instancetype."""
    paths = ", ".join(c.path for c in error.conflicts)
    return f"VMI conflicts with instancetype spec in fields: [{paths}]"
