"""Offline validation of one object, in the API server's order.

1. schema (types, enums, quantities, unknown fields): refused before any webhook;
2. virt-api's mutating webhook: create-time defaults (VMI, VM);
3. virt-api's validating webhook: the admission rules, on the defaulted object.

It is the only module of virtctl that calls kubevirt_api's validators.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from kubevirt_api import KINDS, Model, load_object
from kubevirt_api import validate_object as schema_problems
from kubevirt_api.admission import ClusterConfig
from kubevirt_api.admission import validate_object as admission_problems
from kubevirt_api.defaults import DefaultingError, DefaultsConfig, vm_defaults, vmi_defaults

__all__ = [
    "KUBEVIRT_GROUPS",
    "Problem",
    "is_kubevirt_object",
    "mutate",
    "unknown_fields",
    "validate",
]

KUBEVIRT_GROUPS: frozenset[str] = frozenset(info.group for info in KINDS)


@dataclass(frozen=True, order=True)
class Problem:
    """One reason an object would be refused: the field path and what would be valid."""

    path: str
    message: str


def is_kubevirt_object(data: object) -> bool:
    """Whether ``data`` claims one of KubeVirt's API groups (other objects are not ours)."""
    if not isinstance(data, Mapping):
        return True  # not an object at all: validation reports it
    api_version = data.get("apiVersion")
    if not isinstance(api_version, str):
        return True
    return api_version.rpartition("/")[0] in KUBEVIRT_GROUPS


def _unique(problems: Iterable[Problem]) -> list[Problem]:
    return sorted(set(problems))


_PLAIN_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def _child(path: str, key: str) -> str:
    if not _PLAIN_KEY.match(key):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def _json_names(model: Model) -> dict[str, str]:
    """Attribute name -> JSON key of every typed field of ``model``."""
    names: dict[str, str] = {}
    for f in dataclasses.fields(model):
        info = f.metadata.get("kubevirt_api")
        if info is not None:
            names[f.name] = info.json
    return names


def unknown_fields(model: Model, path: str = "") -> Iterator[Problem]:
    """Fields the schema does not know, anywhere under ``model``.

    kubectl's default strict field validation makes the API server refuse them
    (a misspelt field would otherwise be dropped silently).
    """
    names = _json_names(model)
    if names:  # a model without typed fields is a free-form object
        known = set(names.values())
        for key in sorted(model.extra):
            if key not in known:
                yield Problem(
                    _child(path, key),
                    "unknown field; known fields here: " + ", ".join(sorted(known)),
                )
    for attribute, key in names.items():
        yield from _nested(getattr(model, attribute), _child(path, key))


def _nested(value: object, path: str) -> Iterator[Problem]:
    if isinstance(value, Model):
        yield from unknown_fields(value, path)
    elif isinstance(value, tuple | list):
        for i, item in enumerate(value):
            yield from _nested(item, f"{path}[{i}]")
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _nested(item, _child(path, str(key)))


def validate(data: object, config: ClusterConfig | None = None) -> list[Problem]:
    """Every problem that would make the API server refuse ``data``; [] when it is valid.

    Order of checks as on the server: schema (types, enums, quantities, unknown
    fields), then admission rules on objects that passed.
    """
    found = [Problem(e.path, e.message) for e in schema_problems(data)]
    if found:
        return _unique(found)
    found = list(unknown_fields(load_object(data)))
    if found:
        return _unique(found)
    assert isinstance(data, Mapping)  # the schema accepted it, so it is an object
    try:
        obj = mutate(data)
    except DefaultingError as exc:
        return [Problem("", str(exc))]
    causes = admission_problems(obj, config or ClusterConfig())
    return _unique(Problem(c.field, c.message) for c in causes)


def mutate(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """What virt-api's mutating webhook makes of ``obj`` on create (a new object)."""
    group = str(obj.get("apiVersion", "")).rpartition("/")[0]
    kind = obj.get("kind")
    if group == "kubevirt.io" and kind == "VirtualMachineInstance":
        return vmi_defaults(obj, DefaultsConfig())
    if group == "kubevirt.io" and kind == "VirtualMachine":
        return vm_defaults(obj, DefaultsConfig(), create=True)
    return obj
