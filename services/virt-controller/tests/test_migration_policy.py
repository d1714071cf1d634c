"""MigrationPolicy matching against upstream's scoring rules, and the resolved options."""

from __future__ import annotations

from typing import Any

import pytest
from kubevirt_api import ClusterConfig, InvalidObjectError, MigrationPolicy, Quantity, dump, load
from virt_controller.migration_policy import match_policy, resolve_options


def policy(name: str, vmi: dict[str, str] | None = None, ns: dict[str, str] | None = None,
           **spec: Any) -> MigrationPolicy:  # fmt: skip
    selectors: dict[str, Any] = {}
    if vmi is not None:
        selectors["virtualMachineInstanceSelector"] = vmi
    if ns is not None:
        selectors["namespaceSelector"] = ns
    return load(
        MigrationPolicy,
        {
            "apiVersion": "migrations.kubevirt.io/v1alpha1",
            "kind": "MigrationPolicy",
            "metadata": {"name": name},
            "spec": {"selectors": selectors, **spec},
        },
    )


def name_of(found: MigrationPolicy | None) -> str | None:
    return found.metadata.name if found is not None and found.metadata else None


def test_every_selector_label_must_match() -> None:
    policies = [policy("partial", vmi={"app": "db", "tier": "gold"})]
    assert match_policy(policies, {"app": "db"}, {}) is None
    assert name_of(match_policy(policies, {"app": "db", "tier": "gold"}, {})) == "partial"


def test_the_most_matched_labels_win_vmi_and_namespace_together() -> None:
    policies = [
        policy("vmi-one", vmi={"app": "db"}),
        policy("vmi-and-ns", vmi={"app": "db"}, ns={"team": "a"}),
    ]
    assert name_of(match_policy(policies, {"app": "db"}, {"team": "a"})) == "vmi-and-ns"


def test_a_tie_goes_to_more_vmi_labels_then_the_smallest_name() -> None:
    by_ns = policy("a-ns", ns={"team": "a", "env": "prod"})
    by_vmi = policy("z-vmi", vmi={"app": "db", "tier": "gold"})
    vmi_labels = {"app": "db", "tier": "gold"}
    assert name_of(match_policy([by_ns, by_vmi], vmi_labels, {"team": "a", "env": "prod"})) == (
        "z-vmi"
    )
    same = [policy("b", vmi={"app": "db"}), policy("a", vmi={"tier": "gold"})]
    assert name_of(match_policy(same, vmi_labels, {})) == "a"


def test_the_namespace_selector_counts_only_when_the_vmi_has_labels() -> None:
    ns_only = [policy("ns", ns={"team": "a"})]
    # Upstream's quirk: an unlabelled VMI skips every selector and matches at score 0 ...
    assert name_of(match_policy(ns_only, None, {"team": "b"})) == "ns"
    # ... while a labelled one is held to the namespace selector.
    assert match_policy(ns_only, {"app": "db"}, {"team": "b"}) is None
    assert match_policy(ns_only, {"app": "db"}, None) is None


def test_a_policy_without_selectors_does_not_load_so_never_matches() -> None:
    raw = {
        "apiVersion": "migrations.kubevirt.io/v1alpha1",
        "kind": "MigrationPolicy",
        "metadata": {"name": "none"},
        "spec": {"allowPostCopy": True},
    }
    with pytest.raises(InvalidObjectError):  # the controller skips what does not load
        load(MigrationPolicy, raw)


def test_policy_fields_override_the_cluster_and_disruption_follows_post_copy() -> None:
    cluster = ClusterConfig.from_kubevirt(
        {"spec": {"configuration": {"migrations": {"progressTimeout": 60, "bandwidthPerMigration": "64Mi"}}}}
    ).migrations  # fmt: skip
    chosen = policy("slow", vmi={}, bandwidthPerMigration="1Mi", allowPostCopy=True)
    options = dump(resolve_options(cluster, chosen.spec))
    assert options["bandwidthPerMigration"] == "1Mi"
    assert options["progressTimeout"] == 60  # not in the policy: the cluster's
    assert options["completionTimeoutPerGiB"] == 150  # upstream's default
    assert options["allowPostCopy"] is True
    assert options["allowWorkloadDisruption"] is True
    assert options["parallelMigrationsPerCluster"] == 5


def test_without_a_policy_the_cluster_options_hold() -> None:
    options = resolve_options(ClusterConfig().migrations, None)
    assert options.bandwidth_per_migration == Quantity.parse("0Mi")
    assert options.allow_workload_disruption is False
    assert options.max_downtime_ms == 900


def test_experimental_options_overlay_field_by_field() -> None:
    cluster = ClusterConfig().migrations
    first = policy("x", vmi={}, experimental={"stallDetector": {"stallMargin": 3}})
    options = dump(resolve_options(cluster, first.spec))
    assert options["experimental"] == {"stallDetector": {"stallMargin": 3}}
