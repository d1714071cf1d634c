"""ControllerRevisions that pin a VM to the instancetype and preference it started with.

Upstream's ``revision.CreateControllerRevision``: one revision per referenced object,
named ``<vm>-<object>-<apiVersion>-<object uid>-<generation>``, controlled by the VM,
labelled with the object's generation, kind, name, uid and version, and holding the whole
object without labels, annotations, finalizers, owner references or managed fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ..values import as_map, as_str
from ._json import JSON, clone
from .matchers import Matcher

__all__ = [
    "OBJECT_GENERATION_LABEL",
    "OBJECT_KIND_LABEL",
    "OBJECT_NAME_LABEL",
    "OBJECT_UID_LABEL",
    "OBJECT_VERSION_LABEL",
    "controller_revision",
    "revision_name",
    "revision_spec",
    "same_revision_data",
    "synced_status_ref",
]

OBJECT_GENERATION_LABEL: Final = "instancetype.kubevirt.io/object-generation"
OBJECT_KIND_LABEL: Final = "instancetype.kubevirt.io/object-kind"
OBJECT_NAME_LABEL: Final = "instancetype.kubevirt.io/object-name"
OBJECT_UID_LABEL: Final = "instancetype.kubevirt.io/object-uid"
OBJECT_VERSION_LABEL: Final = "instancetype.kubevirt.io/object-version"
_STRIPPED: Final = ("labels", "annotations", "finalizers", "ownerReferences", "managedFields")


def _version(obj: Mapping[str, Any]) -> str:
    return str(obj.get("apiVersion") or "").rpartition("/")[2] or "v1beta1"


def revision_name(vm_name: str, obj: Mapping[str, Any]) -> str:
    """Upstream's ``GenerateName``: ``<vm>-<object>-<version>-<uid>-<generation>``."""
    meta = as_map(obj.get("metadata"))
    return (
        f"{vm_name}-{meta.get('name')}-{_version(obj)}-{meta.get('uid')}-"
        f"{int(meta.get('generation') or 0)}"
    )


def controller_revision(vm: Mapping[str, Any], obj: Mapping[str, Any]) -> JSON:
    """The ControllerRevision (apps/v1) that stores `obj` for `vm`."""
    vm_meta = as_map(vm.get("metadata"))
    meta = as_map(obj.get("metadata"))
    data: JSON = clone(dict(obj))
    data.pop("status", None)
    data["metadata"] = {k: clone(v) for k, v in meta.items() if k not in _STRIPPED}
    return {
        "apiVersion": "apps/v1",
        "kind": "ControllerRevision",
        "metadata": {
            "name": revision_name(str(vm_meta.get("name")), obj),
            "namespace": vm_meta.get("namespace"),
            "ownerReferences": [
                {
                    "apiVersion": "kubevirt.io/v1",
                    "kind": "VirtualMachine",
                    "name": vm_meta.get("name"),
                    "uid": vm_meta.get("uid"),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
            "labels": {
                OBJECT_GENERATION_LABEL: str(int(meta.get("generation") or 0)),
                OBJECT_KIND_LABEL: str(obj.get("kind")),
                OBJECT_NAME_LABEL: str(meta.get("name")),
                OBJECT_UID_LABEL: str(meta.get("uid")),
                OBJECT_VERSION_LABEL: _version(obj),
            },
        },
        "data": data,
        "revision": 0,
    }


def revision_spec(revision: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The instancetype or preference spec a revision holds (None: not one of ours)."""
    data = as_map(revision.get("data"))
    if not str(data.get("apiVersion") or "").startswith("instancetype.kubevirt.io/"):
        return None
    spec = data.get("spec")
    return spec if isinstance(spec, Mapping) else None


def same_revision_data(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two revisions hold the same spec (upstream's ``Compare``)."""
    return revision_spec(a) is not None and revision_spec(a) == revision_spec(b)


def synced_status_ref(matcher: Matcher, current: Mapping[str, Any] | None) -> JSON:
    """``status.instancetypeRef``/``preferenceRef`` after following `matcher`.

    A changed name, kind or inferFromVolume drops controllerRevisionRef (a new revision is
    due); a matcher's revisionName wins. The caller stores a revision when the result has
    no controllerRevisionRef.
    """
    ref: JSON = clone(dict(current or {}))
    changed = False
    for key, value in (
        ("name", matcher.name),
        ("kind", matcher.kind),
        ("inferFromVolume", matcher.infer_from_volume),
    ):
        if value and value != ref.get(key):
            ref[key] = value
            changed = True
    if changed:
        ref.pop("controllerRevisionRef", None)
    policy = matcher.infer_from_volume_failure_policy
    if policy is not None and policy != ref.get("inferFromVolumeFailurePolicy"):
        ref["inferFromVolumeFailurePolicy"] = policy
    if matcher.revision_name and (
        as_str(as_map(ref.get("controllerRevisionRef")).get("name")) != matcher.revision_name
    ):
        ref["controllerRevisionRef"] = {"name": matcher.revision_name}
    return ref
