"""The admission webhooks: names and paths as upstream, one table for routes and manifests."""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Mapping, Set
from dataclasses import dataclass, field
from typing import Any

import structlog
from aiohttp import web
from kube_runtime import ApiError, KubeClient
from kubevirt_api.admission import (
    Cause,
    CauseType,
    ClusterConfig,
    validate_instancetype,
    validate_migration_create,
    validate_migration_policy,
    validate_migration_update,
    validate_pool,
    validate_preference,
    validate_preset,
    validate_replicaset,
    validate_restore,
    validate_snapshot,
    validate_status_update,
    validate_vm,
    validate_vmi_create,
    validate_vmi_update,
)
from kubevirt_api.enums import FINAL_MIGRATION_PHASES, FINAL_VMI_PHASES
from kubevirt_api.instancetypes import InferenceError, matcher_causes
from kubevirt_api.migrations import MIGRATION_SELECTOR_LABEL, live_migratable
from kubevirt_api.resources import (
    VIRTUAL_MACHINE_INSTANCE_MIGRATIONS,
    VIRTUAL_MACHINE_INSTANCES,
    VIRTUAL_MACHINE_RESTORES,
    VIRTUAL_MACHINE_SNAPSHOTS,
)
from service_kit import MetricsRegistry

from .body import BodyTooLargeError, read_body
from .defaulting import Defaulter, default_migration, default_vm, default_vmi
from .eviction import admit_pod_eviction
from .instancetypes import applied_vm, inferred_vm, preferred_vm
from .jsonpatch import diff
from .presets import PresetError, PresetSource, apply_presets, deprecation_warnings
from .review import MalformedReviewError, Review, allow, deny, parse_review

__all__ = [
    "MAX_REVIEW_BYTES",
    "MUTATING_CONFIGURATION",
    "VALIDATING_CONFIGURATION",
    "WEBHOOKS",
    "AdmissionContext",
    "Rule",
    "Webhook",
    "add_webhook_routes",
]

log = structlog.get_logger("virt_api.webhooks")

MUTATING_CONFIGURATION = "virt-api-mutator"
VALIDATING_CONFIGURATION = "virt-api-validator"
MAX_REVIEW_BYTES = 3 * 1024 * 1024  # the API server's own request limit


@dataclass(frozen=True, slots=True)
class Rule:
    """Which requests a webhook receives (an admissionregistration RuleWithOperations)."""

    group: str
    versions: tuple[str, ...]
    resources: tuple[str, ...]
    operations: tuple[str, ...]


@dataclass
class AdmissionContext:
    """What admission consults besides the review: cluster config and trusted users."""

    cluster_config: Callable[[], Awaitable[ClusterConfig]]
    kubevirt_users: Set[str] = frozenset()
    # Groups whose members count as KubeVirt components (host-run components use admin creds).
    kubevirt_groups: Set[str] = frozenset()
    # Rules that look at other objects (a migration's VMI) read them here; None: skip them.
    api: KubeClient | None = None
    metrics: MetricsRegistry = field(default_factory=MetricsRegistry)
    # The namespace's VirtualMachineInstancePresets, merged into new VMIs; None: no presets.
    presets: PresetSource | None = None
    defaulters: Mapping[str, Defaulter] = field(
        default_factory=lambda: {
            "VirtualMachine": default_vm,
            "VirtualMachineInstance": default_vmi,
            "VirtualMachineInstanceMigration": default_migration,
        }
    )

    def trusted(self, review: Review) -> bool:
        """Whether a KubeVirt component (not a user) sent the change."""
        if review.user.username in self.kubevirt_users:
            return True
        return any(group in self.kubevirt_groups for group in review.user.groups)


Admit = Callable[[Review, AdmissionContext], Awaitable[dict[str, Any]]]


@dataclass(frozen=True, slots=True)
class Webhook:
    """One webhook: its upstream name and path, what it admits, and how."""

    name: str
    path: str
    mutating: bool
    rules: tuple[Rule, ...]
    kinds: frozenset[str]
    admit: Admit
    #: NoneOnDryRun for a webhook that writes elsewhere (and honours dry runs).
    side_effects: str = "None"


CORE = ("kubevirt.io", ("v1", "v1alpha3"))
SNAPSHOT = ("snapshot.kubevirt.io", ("v1beta1", "v1alpha1"))


def _rule(group: tuple[str, tuple[str, ...]], resources: tuple[str, ...], *ops: str) -> Rule:
    return Rule(group[0], group[1], resources, ops)


def _validator(rules: Callable[[Review, ClusterConfig, AdmissionContext], list[Cause]]) -> Admit:
    async def admit(review: Review, ctx: AdmissionContext) -> dict[str, Any]:
        config = await ctx.cluster_config()
        causes = rules(review, config, ctx)
        return deny(review.uid, causes) if causes else allow(review.uid)

    return admit


def _mutator(kind: str) -> Admit:
    async def admit(review: Review, ctx: AdmissionContext) -> dict[str, Any]:
        defaulter = ctx.defaulters.get(kind)
        if defaulter is None or review.operation not in ("CREATE", "UPDATE"):
            return allow(review.uid)
        obj = review.object
        with_presets = kind == "VirtualMachineInstance" and review.operation == "CREATE"
        if with_presets and ctx.presets is not None:
            # As upstream: presets first, then the defaults fill in what is still unset.
            try:
                obj = apply_presets(obj, await ctx.presets(_namespace(review))).vmi
            except PresetError as error:
                return deny(review.uid, [Cause("", str(error))])
        if kind == "VirtualMachine" and ctx.api is not None:
            # As upstream's VM mutator: the matchers checked, inferred, then the preference.
            refused = matcher_causes(obj)
            if refused:
                return deny(review.uid, refused)
            try:
                obj = await inferred_vm(ctx.api, obj)
            except InferenceError as error:
                return deny(review.uid, [Cause("", str(error))], code=400, reason="BadRequest")
            obj = await preferred_vm(ctx.api, obj)
        try:
            defaulted = defaulter(obj, review.operation == "CREATE")
        except (ValueError, TypeError, KeyError, AttributeError) as error:
            # The shared defaulting assumes schema-valid input; anything else is refused.
            return deny(review.uid, [Cause("spec", f"cannot apply defaults: {error}")])
        # As upstream, a created VMI that carries a preset annotation is warned about.
        warnings = deprecation_warnings(defaulted) if with_presets else []
        return allow(review.uid, diff(review.object, defaulted), warnings)

    return admit


def _namespace(review: Review) -> str:
    return review.namespace or str((review.object.get("metadata") or {}).get("namespace") or "")


async def _allow_all(review: Review, ctx: AdmissionContext) -> dict[str, Any]:
    return allow(review.uid)


async def _migration_create(review: Review, ctx: AdmissionContext) -> dict[str, Any]:
    """Offline rules, then upstream's: the VMI exists and is not final, is not
    LiveMigratable=False, and has no other unfinished migration (upstream's messages)."""
    causes = validate_migration_create(review.object)
    if causes or ctx.api is None:
        return deny(review.uid, causes) if causes else allow(review.uid)
    name = str(review.object["spec"]["vmiName"])
    namespace = _namespace(review)

    def refuse(message: str) -> dict[str, Any]:
        return deny(review.uid, [Cause("spec.vmiName", message)], code=400, reason="BadRequest")

    try:
        vmi = await ctx.api.get(VIRTUAL_MACHINE_INSTANCES, name, namespace)
    except ApiError as error:
        if error.status == 404:
            return refuse(f'the VMI "{namespace}/{name}" does not exist')
        raise
    vmi = vmi if isinstance(vmi, Mapping) else {}
    status = vmi.get("status")
    if isinstance(status, Mapping) and status.get("phase") in FINAL_VMI_PHASES:
        return refuse("Cannot migrate VMI in finalized state.")
    migratable = live_migratable(vmi)
    if migratable is not None and migratable.get("status") == "False":
        return refuse(
            f"Cannot migrate VMI, Reason: {migratable.get('reason') or ''}, "
            f"Message: {migratable.get('message') or ''}"
        )
    listed = await ctx.api.list(
        VIRTUAL_MACHINE_INSTANCE_MIGRATIONS,
        namespace,
        label_selector=f"{MIGRATION_SELECTOR_LABEL}={name}",
    )
    for other in (listed or {}).get("items") or ():
        if ((other.get("status") or {}).get("phase") or "") in FINAL_MIGRATION_PHASES:
            continue
        return refuse(
            "in-flight migration detected. Active migration job "
            f"({(other.get('metadata') or {}).get('uid')}) is currently already in progress "
            f"for VMI {name}."
        )
    return allow(review.uid)


async def _restore_validate(review: Review, ctx: AdmissionContext) -> dict[str, Any]:
    """Offline rules, then upstream's: no other unfinished restore of the same target, and
    the snapshot, if it exists, has not failed (a missing one is waited for)."""
    old = review.old_object if review.operation == "UPDATE" else None
    causes = validate_restore(review.object, old)
    if causes or old is not None or ctx.api is None:
        return deny(review.uid, causes) if causes else allow(review.uid)
    namespace = _namespace(review)
    spec = review.object.get("spec") or {}
    target = str((spec.get("target") or {}).get("name"))
    listed = await ctx.api.list(VIRTUAL_MACHINE_RESTORES, namespace)
    for other in (listed or {}).get("items") or ():
        other_spec = other.get("spec") or {}
        if (other_spec.get("target") or {}).get("name") != target:
            continue
        if (other.get("status") or {}).get("complete") is True:
            continue
        name = (other.get("metadata") or {}).get("name")
        return deny(
            review.uid,
            [Cause("spec.target", f'VirtualMachineRestore "{name}" in progress for VM {target}')],
        )
    snapshot_name = str(spec.get("virtualMachineSnapshotName"))
    try:
        snapshot = await ctx.api.get(VIRTUAL_MACHINE_SNAPSHOTS, snapshot_name, namespace)
    except ApiError as error:
        if error.status == 404:
            return allow(review.uid)  # the controller waits for it to exist and be ready
        raise
    if ((snapshot or {}).get("status") or {}).get("phase") == "Failed":
        return deny(
            review.uid,
            [
                Cause(
                    "spec.virtualMachineSnapshotName",
                    f'VirtualMachineSnapshot "{snapshot_name}" has failed and cannot be restored',
                )
            ],
        )
    return allow(review.uid)


async def _vm_validate(review: Review, ctx: AdmissionContext) -> dict[str, Any]:
    """The VM rules, judged with its instancetype and preference applied (as upstream)."""
    config = await ctx.cluster_config()
    vm: Mapping[str, Any] = review.object
    causes: list[Cause] = []
    if ctx.api is not None:
        vm, causes = await applied_vm(ctx.api, vm)
    causes = causes or validate_vm(vm, config)
    return deny(review.uid, causes) if causes else allow(review.uid)


def _vmi_update(review: Review, config: ClusterConfig, ctx: AdmissionContext) -> list[Cause]:
    return validate_vmi_update(review.object, review.old_object or {}, trusted=ctx.trusted(review))


def _status(review: Review, config: ClusterConfig, ctx: AdmissionContext) -> list[Cause]:
    return validate_status_update(review.kind, review.object, review.old_object)


WEBHOOKS: tuple[Webhook, ...] = (
    Webhook(
        "virtualmachines-mutator.kubevirt.io",
        "/virtualmachines-mutate",
        True,
        (_rule(CORE, ("virtualmachines",), "CREATE", "UPDATE"),),
        frozenset({"VirtualMachine"}),
        _mutator("VirtualMachine"),
    ),
    Webhook(
        "virtualmachineinstances-mutator.kubevirt.io",
        "/virtualmachineinstances-mutate",
        True,
        (_rule(CORE, ("virtualmachineinstances",), "CREATE", "UPDATE"),),
        frozenset({"VirtualMachineInstance"}),
        _mutator("VirtualMachineInstance"),
    ),
    Webhook(
        "migrations-mutator.kubevirt.io",
        "/migration-mutate-create",
        True,
        (_rule(CORE, ("virtualmachineinstancemigrations",), "CREATE"),),
        frozenset({"VirtualMachineInstanceMigration"}),
        _mutator("VirtualMachineInstanceMigration"),
    ),
    Webhook(
        "migrationpolicies-mutator.kubevirt.io",
        "/migrationpolicy-mutate",
        True,
        (
            _rule(
                ("migrations.kubevirt.io", ("v1alpha1",)),
                ("migrationpolicies",),
                "CREATE",
                "UPDATE",
            ),
        ),
        frozenset({"MigrationPolicy"}),
        _allow_all,
    ),
    Webhook(
        "virtualmachineinstances-create-validator.kubevirt.io",
        "/virtualmachineinstances-validate-create",
        False,
        (_rule(CORE, ("virtualmachineinstances",), "CREATE"),),
        frozenset({"VirtualMachineInstance"}),
        _validator(lambda r, c, ctx: validate_vmi_create(r.object, c, trusted=ctx.trusted(r))),
    ),
    Webhook(
        "virtualmachineinstances-update-validator.kubevirt.io",
        "/virtualmachineinstances-validate-update",
        False,
        (_rule(CORE, ("virtualmachineinstances",), "UPDATE"),),
        frozenset({"VirtualMachineInstance"}),
        _validator(_vmi_update),
    ),
    Webhook(
        "virtualmachine-validator.kubevirt.io",
        "/virtualmachines-validate",
        False,
        (_rule(CORE, ("virtualmachines",), "CREATE", "UPDATE"),),
        frozenset({"VirtualMachine"}),
        _vm_validate,
    ),
    Webhook(
        "virtualmachinereplicaset-validator.kubevirt.io",
        "/virtualmachinereplicaset-validate",
        False,
        (_rule(CORE, ("virtualmachineinstancereplicasets",), "CREATE", "UPDATE"),),
        frozenset({"VirtualMachineInstanceReplicaSet"}),
        _validator(lambda r, c, ctx: validate_replicaset(r.object, c)),
    ),
    Webhook(
        "virtualmachinepool-validator.kubevirt.io",
        "/virtualmachinepool-validate",
        False,
        (
            _rule(
                ("pool.kubevirt.io", ("v1beta1", "v1alpha1")),
                ("virtualmachinepools",),
                "CREATE",
                "UPDATE",
            ),
        ),
        frozenset({"VirtualMachinePool"}),
        _validator(lambda r, c, ctx: validate_pool(r.object, c)),
    ),
    Webhook(
        "virtualmachinesnapshot-validator.snapshot.kubevirt.io",
        "/virtualmachinesnapshots-validate",
        False,
        (_rule(SNAPSHOT, ("virtualmachinesnapshots",), "CREATE", "UPDATE"),),
        frozenset({"VirtualMachineSnapshot"}),
        _validator(
            lambda r, c, ctx: validate_snapshot(
                r.object, r.old_object if r.operation == "UPDATE" else None
            )
        ),
    ),
    Webhook(
        "virtualmachinerestore-validator.snapshot.kubevirt.io",
        "/virtualmachinerestores-validate",
        False,
        (_rule(SNAPSHOT, ("virtualmachinerestores",), "CREATE", "UPDATE"),),
        frozenset({"VirtualMachineRestore"}),
        _restore_validate,
    ),
    Webhook(
        "virtualmachinepreset-validator.kubevirt.io",
        "/vmipreset-validate",
        False,
        (_rule(CORE, ("virtualmachineinstancepresets",), "CREATE", "UPDATE"),),
        frozenset({"VirtualMachineInstancePreset"}),
        _validator(lambda r, c, ctx: validate_preset(r.object, c)),
    ),
    Webhook(
        "migration-create-validator.kubevirt.io",
        "/migration-validate-create",
        False,
        (_rule(CORE, ("virtualmachineinstancemigrations",), "CREATE"),),
        frozenset({"VirtualMachineInstanceMigration"}),
        _migration_create,
    ),
    Webhook(
        "migration-update-validator.kubevirt.io",
        "/migration-validate-update",
        False,
        (_rule(CORE, ("virtualmachineinstancemigrations",), "UPDATE"),),
        frozenset({"VirtualMachineInstanceMigration"}),
        _validator(lambda r, c, ctx: validate_migration_update(r.object, r.old_object or {})),
    ),
    Webhook(
        "virtualmachineinstancetype-validator.instancetype.kubevirt.io",
        "/virtualmachineinstancetypes-validate",
        False,
        (
            _rule(
                ("instancetype.kubevirt.io", ("v1beta1",)),
                ("virtualmachineinstancetypes",),
                "CREATE",
                "UPDATE",
            ),
        ),
        frozenset({"VirtualMachineInstancetype"}),
        _validator(lambda r, c, ctx: validate_instancetype(r.object)),
    ),
    Webhook(
        "virtualmachineclusterinstancetype-validator.instancetype.kubevirt.io",
        "/virtualmachineclusterinstancetypes-validate",
        False,
        (
            _rule(
                ("instancetype.kubevirt.io", ("v1beta1",)),
                ("virtualmachineclusterinstancetypes",),
                "CREATE",
                "UPDATE",
            ),
        ),
        frozenset({"VirtualMachineClusterInstancetype"}),
        _validator(lambda r, c, ctx: validate_instancetype(r.object)),
    ),
    Webhook(
        "virtualmachinepreference-validator.instancetype.kubevirt.io",
        "/virtualmachinepreferences-validate",
        False,
        (
            _rule(
                ("instancetype.kubevirt.io", ("v1beta1",)),
                ("virtualmachinepreferences",),
                "CREATE",
                "UPDATE",
            ),
        ),
        frozenset({"VirtualMachinePreference"}),
        _validator(lambda r, c, ctx: validate_preference(r.object)),
    ),
    Webhook(
        "virtualmachineclusterpreference-validator.instancetype.kubevirt.io",
        "/virtualmachineclusterpreferences-validate",
        False,
        (
            _rule(
                ("instancetype.kubevirt.io", ("v1beta1",)),
                ("virtualmachineclusterpreferences",),
                "CREATE",
                "UPDATE",
            ),
        ),
        frozenset({"VirtualMachineClusterPreference"}),
        _validator(lambda r, c, ctx: validate_preference(r.object)),
    ),
    Webhook(
        "kubevirt-crd-status-validator.kubevirt.io",
        "/status-validate",
        False,
        (
            _rule(
                CORE,
                (
                    "virtualmachines/status",
                    "virtualmachineinstancereplicasets/status",
                    "virtualmachineinstancemigrations/status",
                ),
                "CREATE",
                "UPDATE",
            ),
        ),
        frozenset(
            {
                "VirtualMachine",
                "VirtualMachineInstanceReplicaSet",
                "VirtualMachineInstanceMigration",
            }
        ),
        _validator(_status),
    ),
    Webhook(
        "virt-launcher-eviction-interceptor.kubevirt.io",
        "/pod-eviction-validate",
        False,
        (Rule("", ("v1",), ("pods/eviction",), ("*",)),),
        frozenset({"Eviction"}),
        admit_pod_eviction,
        side_effects="NoneOnDryRun",
    ),
    Webhook(
        "migration-policy-validator.kubevirt.io",
        "/migration-policy-validate-create",
        False,
        (
            _rule(
                ("migrations.kubevirt.io", ("v1alpha1",)),
                ("migrationpolicies",),
                "CREATE",
                "UPDATE",
            ),
        ),
        frozenset({"MigrationPolicy"}),
        _validator(lambda r, c, ctx: validate_migration_policy(r.object)),
    ),
)


def _bad_request(message: str) -> web.Response:
    return web.json_response(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "status": "Failure",
            "code": 400,
            "reason": "BadRequest",
            "message": message,
        },
        status=400,
    )


def _handler(
    webhook: Webhook, ctx: AdmissionContext
) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    reviews = ctx.metrics.counter(
        "kubevirt_virt_api_admission_reviews_total",
        "AdmissionReviews answered, by webhook and result (allowed, denied, bad_request).",
        ["webhook", "result"],
    )
    seconds = ctx.metrics.histogram(
        "kubevirt_virt_api_admission_duration_seconds",
        "Time to answer one AdmissionReview, by webhook.",
        labelnames=["webhook"],
    )

    async def handle(request: web.Request) -> web.StreamResponse:
        started = time.perf_counter()
        response = await answer(request)
        result = "bad_request" if response.status == 400 else "allowed"
        if response.status == 200 and b'"allowed": false' in (
            response.body if isinstance(response.body, bytes) else b""
        ):
            result = "denied"
        reviews.inc({"webhook": webhook.name, "result": result})
        seconds.observe({"webhook": webhook.name}, time.perf_counter() - started)
        return response

    async def answer(request: web.Request) -> web.Response:
        if request.content_type != "application/json":
            return _bad_request("Content-Type must be application/json")
        if request.content_length is not None and request.content_length > MAX_REVIEW_BYTES:
            return _bad_request(f"an AdmissionReview is limited to {MAX_REVIEW_BYTES} bytes")
        try:
            raw = await read_body(request, MAX_REVIEW_BYTES)
        except BodyTooLargeError:
            return _bad_request(f"an AdmissionReview is limited to {MAX_REVIEW_BYTES} bytes")
        try:
            body = json.loads(raw)
        except (ValueError, UnicodeDecodeError, RecursionError):
            # RecursionError: nesting deeper than the parser's stack, e.g. "[[[[...".
            return _bad_request("body is not JSON")
        try:
            review = parse_review(body)
        except MalformedReviewError as error:
            if error.uid is None:
                return _bad_request(f"malformed AdmissionReview: {error}")
            return web.json_response(
                deny(
                    error.uid,
                    [Cause("", f"malformed AdmissionReview: {error}")],
                    code=400,
                    reason="BadRequest",
                )
            )
        if review.kind not in webhook.kinds:
            cause = Cause(
                "kind",
                f"webhook {webhook.name} admits {', '.join(sorted(webhook.kinds))}, not {review.kind}",
                CauseType.NOT_SUPPORTED,
            )
            return web.json_response(deny(review.uid, [cause], code=400, reason="BadRequest"))
        try:
            answer = await webhook.admit(review, ctx)
        except Exception:
            # A rule bug must not leave the API server without an answer (failurePolicy Fail
            # would refuse anyway); deny with a clear message and log the traceback.
            log.exception("admission failed", webhook=webhook.name, uid=review.uid)
            answer = deny(
                review.uid,
                [Cause("", "internal error in virt-api admission; see virt-api's log")],
                code=500,
                reason="InternalError",
            )
        return web.json_response(answer)

    return handle


def add_webhook_routes(app: web.Application, ctx: AdmissionContext) -> None:
    """Route every webhook path to its handler."""
    for webhook in WEBHOOKS:
        app.router.add_post(webhook.path, _handler(webhook, ctx))
