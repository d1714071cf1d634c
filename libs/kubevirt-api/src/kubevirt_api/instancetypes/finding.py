"""Finding the instancetype and preference specs a VM uses (upstream's ``find.SpecFinder``).

A VM pinned to a ControllerRevision (``revisionName`` in its matcher, or
``status.*Ref.controllerRevisionRef`` for the same object name) uses the spec stored
there, so a later edit of the object does not change it; otherwise the object itself.
The caller supplies the reads (`Getter`), so the rule stays free of I/O.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..resources import CONTROLLER_REVISIONS, Resource
from ..values import as_map, as_str
from .matchers import Matcher, instancetype_matcher, preference_matcher
from .revisions import OBJECT_NAME_LABEL, revision_spec

__all__ = ["FoundSpecs", "Getter", "NotFoundError", "find_object", "find_spec", "find_specs"]

#: Reads one object (`resource`, `name`, `namespace`); None when it does not exist.
Getter = Callable[[Resource, str, "str | None"], Awaitable["Mapping[str, Any] | None"]]


class NotFoundError(LookupError):
    """The named instancetype, preference or revision does not exist (upstream's wording)."""

    def __init__(self, resource: Resource, name: str, *, preference: bool) -> None:
        self.preference = preference
        super().__init__(f'{resource.plural}.{resource.group} "{name}" not found')


@dataclass(frozen=True, slots=True)
class FoundSpecs:
    """The specs a VM's matchers resolve to (None: the VM names none)."""

    instancetype: Mapping[str, Any] | None
    preference: Mapping[str, Any] | None


async def find_object(get: Getter, vm: Mapping[str, Any], matcher: Matcher) -> Mapping[str, Any]:
    """The instancetype or preference object itself. Raises NotFoundError."""
    namespace = None if matcher.cluster else as_str(as_map(vm.get("metadata")).get("namespace"))
    found = await get(matcher.resource, matcher.name, namespace)
    if found is None:
        raise NotFoundError(
            matcher.resource, matcher.name, preference=matcher.field == "preference"
        )
    return found


async def find_spec(
    get: Getter, vm: Mapping[str, Any], matcher: Matcher, ref: Mapping[str, Any] | None
) -> Mapping[str, Any]:
    """The spec `matcher` resolves to, its revision first; `ref` is the VM's status ref."""
    namespace = as_str(as_map(vm.get("metadata")).get("namespace"))
    preference = matcher.field == "preference"
    if matcher.revision_name:
        revision = await get(CONTROLLER_REVISIONS, matcher.revision_name, namespace)
        if revision is None:
            raise NotFoundError(CONTROLLER_REVISIONS, matcher.revision_name, preference=preference)
        spec = revision_spec(revision)
        if spec is not None:
            return spec
    stored = as_str(as_map(as_map(ref).get("controllerRevisionRef")).get("name"))
    if stored:
        revision = await get(CONTROLLER_REVISIONS, stored, namespace)
        labels = as_map(as_map(as_map(revision).get("metadata")).get("labels"))
        # Only a revision of the object the VM names now counts (the matcher may have moved on).
        if revision is not None and labels.get(OBJECT_NAME_LABEL) == matcher.name:
            spec = revision_spec(revision)
            if spec is not None:
                return spec
    return as_map((await find_object(get, vm, matcher)).get("spec"))


async def find_specs(
    get: Getter, vm: Mapping[str, Any], refs: Mapping[str, Any] | None = None
) -> FoundSpecs:
    """Both specs of `vm`; `refs` holds the status refs (default: the VM's own status).

    Raises NotFoundError (its ``preference`` says which) and UnknownKindError.
    """
    status = as_map(refs if refs is not None else vm.get("status"))
    itype = instancetype_matcher(vm)
    pref = preference_matcher(vm)
    return FoundSpecs(
        await find_spec(get, vm, itype, as_map(status.get("instancetypeRef")))
        if itype is not None
        else None,
        await find_spec(get, vm, pref, as_map(status.get("preferenceRef")))
        if pref is not None
        else None,
    )
