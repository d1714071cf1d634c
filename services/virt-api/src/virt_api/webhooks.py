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
    validate_status_update,
    validate_vm,
    validate_vmi_create,
    validate_vmi_update,
)
from kubevirt_api.enums import VirtualMachineInstancePhase as Phase
from kubevirt_api.resources import VIRTUAL_MACHINE_INSTANCES
from service_kit import MetricsRegistry

from .body import BodyTooLargeError, read_body
from .defaulting import Defaulter, default_migration, default_vm, default_vmi
from .jsonpatch import diff
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


CORE = ("kubevirt.io", ("v1", "v1alpha3"))


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
        try:
            defaulted = defaulter(review.object, review.operation == "CREATE")
        except (ValueError, TypeError, KeyError, AttributeError) as error:
            # The shared defaulting assumes schema-valid input; anything else is refused.
            return deny(review.uid, [Cause("spec", f"cannot apply defaults: {error}")])
        return allow(review.uid, diff(review.object, defaulted))

    return admit


async def _allow_all(review: Review, ctx: AdmissionContext) -> dict[str, Any]:
    return allow(review.uid)


async def _migration_create(review: Review, ctx: AdmissionContext) -> dict[str, Any]:
    """Offline rules, then (as upstream) the VMI must exist, run, and not be migrating."""
    causes = validate_migration_create(review.object)
    if causes or ctx.api is None:
        return deny(review.uid, causes) if causes else allow(review.uid)
    name = str(review.object["spec"]["vmiName"])
    namespace = review.namespace or str(
        (review.object.get("metadata") or {}).get("namespace") or ""
    )
    field = "spec.vmiName"
    try:
        vmi = await ctx.api.get(VIRTUAL_MACHINE_INSTANCES, name, namespace)
    except ApiError as error:
        if error.status == 404:
            return deny(
                review.uid,
                [
                    Cause(
                        field,
                        f"VMI '{name}' does not exist in namespace '{namespace}'; migrate a running VMI",
                    )
                ],
            )
        raise
    status = vmi.get("status") if isinstance(vmi, Mapping) else None
    status = status if isinstance(status, Mapping) else {}
    phase = status.get("phase") or Phase.PENDING
    if phase != Phase.RUNNING:
        return deny(
            review.uid,
            [Cause(field, f"VMI '{name}' is {phase}; only a Running VMI can be migrated")],
        )
    state = status.get("migrationState")
    if isinstance(state, Mapping) and state and not state.get("completed"):
        return deny(
            review.uid,
            [
                Cause(
                    field,
                    f"VMI '{name}' is already being migrated; wait for that migration to finish",
                )
            ],
        )
    return allow(review.uid)


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
        _validator(lambda r, c, ctx: validate_vm(r.object, c)),
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
