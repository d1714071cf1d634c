"""Live-migration facts every service shares: upstream's label, annotation and finalizer
names, the cluster's migration defaults, and who may be evicted by live migration.

virt-controller (migration and evacuation controllers), virt-api (migration admission,
the pod-eviction webhook), virt-handler (the target label), virt-launcher (the test hook)
and virtctl (migrate-cancel) read these; none of them copies a name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from .clusterconfig import ClusterConfig
from .enums import EvictionStrategy
from .values import as_map, as_str

__all__ = [
    "EVACUATION_MIGRATION_ANNOTATION",
    "EVICTION_SOURCE_ANNOTATION",
    "FORCE_LAUNCHER_MIGRATION_FAILURE_ANNOTATION",
    "LIVE_MIGRATABLE",
    "MIGRATION_FINALIZER",
    "MIGRATION_JOB_LABEL",
    "MIGRATION_SELECTOR_LABEL",
    "MIGRATION_TARGET_NODE_LABEL",
    "PENDING_TIMEOUT_ANNOTATION",
    "UNSCHEDULABLE_TIMEOUT_ANNOTATION",
    "eviction_strategy",
    "live_migratable",
    "migratable_on_eviction",
]

#: On a migration: the name of the VMI it moves (set at admission), to find it by selector.
MIGRATION_SELECTOR_LABEL: Final = "kubevirt.io/vmi-name"
#: On a target launcher pod: the uid of the migration it was created for.
MIGRATION_JOB_LABEL: Final = "kubevirt.io/migrationJobUID"
#: On a VMI at hand-off: the target node, so that node's virt-handler prepares the target.
MIGRATION_TARGET_NODE_LABEL: Final = "kubevirt.io/migrationTargetNodeName"
#: Held by the migration controller until a cancelled migration's abort is final.
MIGRATION_FINALIZER: Final = "kubevirt.io/migrationJobFinalize"
#: On a migration the evacuation controller created: the node being evacuated.
EVACUATION_MIGRATION_ANNOTATION: Final = "kubevirt.io/evacuationMigration"
#: On a VMI whose eviction came from the descheduler ("descheduler").
EVICTION_SOURCE_ANNOTATION: Final = "kubevirt.io/eviction-source"
#: On a migration: seconds an unschedulable target pod may stay Pending (default 300).
UNSCHEDULABLE_TIMEOUT_ANNOTATION: Final = "kubevirt.io/migrationUnschedulablePodTimeoutSeconds"
#: On a migration: seconds a target pod may stay Pending for any reason (default 900).
PENDING_TIMEOUT_ANNOTATION: Final = "kubevirt.io/migrationPendingPodTimeoutSeconds"
#: On a VMI (upstream's functional-test hook): its source launcher fails the migration at once.
FORCE_LAUNCHER_MIGRATION_FAILURE_ANNOTATION: Final = (
    "kubevirt.io/func-test-force-launcher-migration-failure"
)
#: The VMI condition virt-handler sets: True when the guest can be live-migrated.
LIVE_MIGRATABLE: Final = "LiveMigratable"


def live_migratable(vmi: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The VMI's LiveMigratable condition (None while virt-handler has not set it)."""
    conditions = as_map(vmi.get("status")).get("conditions")
    # Informers hand out frozen objects (tuples), admission plain JSON (lists).
    for condition in conditions if isinstance(conditions, list | tuple) else ():
        if as_map(condition).get("type") == LIVE_MIGRATABLE:
            return as_map(condition)
    return None


def eviction_strategy(vmi: Mapping[str, Any], config: ClusterConfig) -> str | None:
    """The VMI's spec.evictionStrategy, else the cluster's (None: neither is set)."""
    own = as_str(as_map(vmi.get("spec")).get("evictionStrategy"))
    return own or config.eviction_strategy


def migratable_on_eviction(vmi: Mapping[str, Any], config: ClusterConfig) -> bool:
    """Whether an eviction of this VMI's pod should live-migrate it (upstream's rule:
    LiveMigrate always, LiveMigrateIfPossible only while LiveMigratable is True)."""
    strategy = eviction_strategy(vmi, config)
    if strategy == EvictionStrategy.LIVE_MIGRATE:
        return True
    if strategy == EvictionStrategy.LIVE_MIGRATE_IF_POSSIBLE:
        condition = live_migratable(vmi)
        return condition is not None and condition.get("status") == "True"
    return False
