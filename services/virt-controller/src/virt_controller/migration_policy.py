"""MigrationPolicy matching and the options a migration runs with (upstream's rules).

A policy matches a VMI only if every label of its selectors matches; its score is the
number of matched VMI labels plus namespace labels. The highest score wins; on a tie the
policy matching more VMI labels, then the lexicographically smallest name. Upstream's
quirks are kept: selectors are skipped while the VMI has no labels at all (so such a VMI
matches any policy with selectors, at score 0), and the namespace selector is evaluated
only when the VMI has labels. A policy without selectors never matches.

The resolved options start from the cluster's `spec.configuration.migrations`; every
field the matched policy sets overrides them. Pure: the controller records the result in
`status.migrationState` at hand-off.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from kubevirt_api import Model
from kubevirt_api.models import (
    MigrationConfiguration,
    MigrationPolicy,
    MigrationPolicySpec,
    VMIMConfigurationOptions,
)

__all__ = ["PolicyScore", "match_policy", "resolve_options", "score_policy"]

M = TypeVar("M", bound=Model)


@dataclass(frozen=True, order=True, slots=True)
class PolicyScore:
    """How specific a matching policy is; greater is better."""

    total: int
    vmi_labels: int


def _matched(selector: Mapping[str, str], labels: Mapping[str, str] | None) -> int | None:
    """How many selector labels `labels` has, or None as soon as one is missing."""
    have = labels or {}
    for key, value in selector.items():
        if have.get(key) != value:
            return None
    return len(selector)


def score_policy(
    policy: MigrationPolicy,
    vmi_labels: Mapping[str, str] | None,
    namespace_labels: Mapping[str, str] | None,
) -> PolicyScore | None:
    """The policy's score for this VMI, or None when it does not match."""
    selectors = policy.spec.selectors  # required: a policy without them does not load
    if vmi_labels is None:
        return PolicyScore(0, 0)  # upstream skips both selectors for an unlabelled VMI
    by_vmi = by_namespace = 0
    if selectors.virtual_machine_instance_selector is not None:
        matched = _matched(selectors.virtual_machine_instance_selector, vmi_labels)
        if matched is None:
            return None
        by_vmi = matched
    if selectors.namespace_selector is not None:
        matched = _matched(selectors.namespace_selector, namespace_labels)
        if matched is None:
            return None
        by_namespace = matched
    return PolicyScore(by_vmi + by_namespace, by_vmi)


def match_policy(
    policies: Iterable[MigrationPolicy],
    vmi_labels: Mapping[str, str] | None,
    namespace_labels: Mapping[str, str] | None,
) -> MigrationPolicy | None:
    """The policy that applies to a VMI with these labels in a namespace with these."""
    best: tuple[PolicyScore, str, MigrationPolicy] | None = None
    for policy in policies:
        score = score_policy(policy, vmi_labels, namespace_labels)
        if score is None:
            continue
        name = (policy.metadata.name if policy.metadata else None) or ""
        if best is None or score > best[0] or (score == best[0] and name < best[1]):
            best = (score, name, policy)
    return best[2] if best else None


def _overlay(base: M | None, top: M) -> M:
    """`base` with every field `top` sets (nested options overlaid field by field)."""
    if base is None:
        return top
    changes = {}
    for f in dataclasses.fields(top):
        if f.name == "extra":
            continue
        value = getattr(top, f.name)
        if value is None:
            continue
        current = getattr(base, f.name)
        if isinstance(value, Model) and isinstance(current, type(value)):
            value = _overlay(current, value)
        changes[f.name] = value
    return dataclasses.replace(base, **changes)


def resolve_options(
    cluster: MigrationConfiguration, policy: MigrationPolicySpec | None
) -> VMIMConfigurationOptions:
    """The options one migration runs with: the cluster's, then the policy's overrides."""
    resolved = VMIMConfigurationOptions(
        allow_auto_converge=cluster.allow_auto_converge,
        allow_post_copy=cluster.allow_post_copy,
        allow_workload_disruption=cluster.allow_workload_disruption,
        bandwidth_per_migration=cluster.bandwidth_per_migration,
        completion_timeout_per_gi_b=cluster.completion_timeout_per_gi_b,
        disable_tls=cluster.disable_tls,
        match_selinux_level_on_migration=cluster.match_selinux_level_on_migration,
        max_downtime_ms=cluster.max_downtime_ms,
        network=cluster.network,
        node_drain_taint_key=cluster.node_drain_taint_key,
        parallel_migrations_per_cluster=cluster.parallel_migrations_per_cluster,
        parallel_outbound_migrations_per_node=cluster.parallel_outbound_migrations_per_node,
        progress_timeout=cluster.progress_timeout,
        unsafe_migration_override=cluster.unsafe_migration_override,
        utility_volumes_timeout=cluster.utility_volumes_timeout,
    )
    if policy is None:
        return resolved
    overrides = VMIMConfigurationOptions(
        allow_auto_converge=policy.allow_auto_converge,
        allow_post_copy=policy.allow_post_copy,
        # For backward compatibility it follows allowPostCopy when the policy leaves it out.
        allow_workload_disruption=policy.allow_workload_disruption
        if policy.allow_workload_disruption is not None
        else policy.allow_post_copy,
        bandwidth_per_migration=policy.bandwidth_per_migration,
        completion_timeout_per_gi_b=policy.completion_timeout_per_gi_b,
        max_downtime_ms=policy.max_downtime_ms,
        experimental=policy.experimental,
    )
    return _overlay(resolved, overrides)
