"""Instancetypes and preferences, applied as upstream KubeVirt applies them.

Pure functions over raw objects (the JSON of a VM, an instancetype spec, a preference
spec), shared by virt-controller (building the VMI from the stored revisions), virt-api
(admission conflicts, the expand-spec subresources) and virtctl (expand, convert):

- :func:`apply_to_vmi_spec` — instancetype then preference onto a VMI spec; conflicts are
  field paths with upstream's message ("VM field(s) … conflicts with selected instance type");
- :func:`expand_vm` — apply + defaults, matchers cleared;
- :func:`instancetype_matcher` / :func:`preference_matcher` — what a VM names, kinds resolved;
- :func:`controller_revision` / :func:`revision_spec` — the revisions that pin a VM;
- :func:`find_specs` — the specs a VM uses (its revisions first), reads injected;
- :func:`infer_matchers` — ``inferFromVolume`` matchers resolved from a PVC's labels.
"""

from .apply import Applied, apply_to_vmi_spec, check_spread_topology, guest_topology
from .conflicts import Conflict, ConflictError, conflicts_message
from .expand import TEMPLATE_SPEC, expand_vm
from .finding import FoundSpecs, Getter, NotFoundError, find_object, find_spec, find_specs
from .infer import (
    DEFAULT_INSTANCETYPE_KIND_LABEL,
    DEFAULT_INSTANCETYPE_LABEL,
    DEFAULT_PREFERENCE_KIND_LABEL,
    DEFAULT_PREFERENCE_LABEL,
    InferenceError,
    LabelsOf,
    infer_matchers,
    matcher_causes,
)
from .matchers import (
    CLUSTER_INSTANCETYPE_ANNOTATION,
    CLUSTER_PREFERENCE_ANNOTATION,
    INSTANCETYPE_ANNOTATION,
    PREFERENCE_ANNOTATION,
    Matcher,
    UnknownKindError,
    instancetype_matcher,
    preference_matcher,
    set_matcher_annotations,
)
from .preference import (
    apply_auto_attach_preferences,
    apply_preference,
    apply_preference_to_vm,
    preferred_topology,
)
from .revisions import (
    OBJECT_GENERATION_LABEL,
    OBJECT_KIND_LABEL,
    OBJECT_NAME_LABEL,
    OBJECT_UID_LABEL,
    OBJECT_VERSION_LABEL,
    controller_revision,
    revision_name,
    revision_spec,
    same_revision_data,
    synced_status_ref,
)

__all__ = [
    "CLUSTER_INSTANCETYPE_ANNOTATION",
    "CLUSTER_PREFERENCE_ANNOTATION",
    "DEFAULT_INSTANCETYPE_KIND_LABEL",
    "DEFAULT_INSTANCETYPE_LABEL",
    "DEFAULT_PREFERENCE_KIND_LABEL",
    "DEFAULT_PREFERENCE_LABEL",
    "INSTANCETYPE_ANNOTATION",
    "OBJECT_GENERATION_LABEL",
    "OBJECT_KIND_LABEL",
    "OBJECT_NAME_LABEL",
    "OBJECT_UID_LABEL",
    "OBJECT_VERSION_LABEL",
    "PREFERENCE_ANNOTATION",
    "TEMPLATE_SPEC",
    "Applied",
    "Conflict",
    "ConflictError",
    "FoundSpecs",
    "Getter",
    "InferenceError",
    "LabelsOf",
    "Matcher",
    "NotFoundError",
    "UnknownKindError",
    "apply_auto_attach_preferences",
    "apply_preference",
    "apply_preference_to_vm",
    "apply_to_vmi_spec",
    "check_spread_topology",
    "conflicts_message",
    "controller_revision",
    "expand_vm",
    "find_object",
    "find_spec",
    "find_specs",
    "guest_topology",
    "infer_matchers",
    "instancetype_matcher",
    "matcher_causes",
    "preference_matcher",
    "preferred_topology",
    "revision_name",
    "revision_spec",
    "same_revision_data",
    "set_matcher_annotations",
    "synced_status_ref",
]
