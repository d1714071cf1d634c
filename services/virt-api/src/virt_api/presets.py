"""VirtualMachineInstancePresets (deprecated upstream, still served): merged into new VMIs.

Upstream's rules, applied by the VMI mutating webhook on CREATE before defaulting:
- a VMI annotated `virtualmachineinstancepresets.admission.kubevirt.io/exclude: "true"`
  gets none;
- the presets of the VMI's namespace whose selector matches its labels are chosen (an
  empty selector matches every VMI); presets that conflict with each other refuse the VMI;
- per preset, each domain section it sets (resources.requests, cpu, firmware, clock and
  its timer, features, devices.watchdog, ioThreadsPolicy) is copied where the VMI has none;
  the preset counts as applied when some section then equals the preset's, and the VMI is
  annotated `virtualmachinepreset.kubevirt.io/<name>: kubevirt.io/v1`; what the VMI sets
  itself wins, and the conflict is logged as a warning.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp
import structlog
from kube_runtime import ApiError, KubeClient
from kubevirt_api.quantity import Quantity, QuantityError
from kubevirt_api.resources import VIRTUAL_MACHINE_INSTANCE_PRESETS
from kubevirt_api.selectors import SelectorError, matches
from kubevirt_api.values import as_list, as_map

__all__ = [
    "ANNOTATION_PREFIX",
    "DEPRECATION_WARNING",
    "EXCLUDE_ANNOTATION",
    "ApiPresets",
    "PresetError",
    "PresetOutcome",
    "PresetSource",
    "annotation_key",
    "apply_presets",
    "deprecation_warnings",
]

log = structlog.get_logger("virt_api.presets")

EXCLUDE_ANNOTATION = "virtualmachineinstancepresets.admission.kubevirt.io/exclude"
ANNOTATION_PREFIX = "virtualmachinepreset.kubevirt.io/"
APPLIED_VALUE = "kubevirt.io/v1"
DEPRECATION_WARNING = (
    "kubevirt.io/v1 VirtualMachineInstancePresets is now deprecated and will be removed in v2."
)

#: The presets of one namespace (raw objects).
PresetSource = Callable[[str], Awaitable[Sequence[Mapping[str, Any]]]]

# Sections a preset sets whole (pointer fields upstream), by their path in the domain.
_SECTIONS: tuple[tuple[str, ...], ...] = (
    ("cpu",),
    ("firmware",),
    ("features",),
    ("devices", "watchdog"),
    ("ioThreadsPolicy",),
)
_CLOCK_OFFSET = ("utc", "timezone")


class PresetError(ValueError):
    """The VMI cannot be admitted: matching presets conflict, or a selector is invalid."""


@dataclass(frozen=True)
class PresetOutcome:
    """The VMI with its presets merged, and the names of those applied."""

    vmi: dict[str, Any]
    applied: tuple[str, ...] = ()


class ApiPresets:
    """Lists a namespace's presets through the API server at each VMI creation."""

    def __init__(self, api: KubeClient) -> None:
        self._api = api

    async def __call__(self, namespace: str) -> Sequence[Mapping[str, Any]]:
        try:
            listing = await self._api.list(VIRTUAL_MACHINE_INSTANCE_PRESETS, namespace)
        except (ApiError, OSError, TimeoutError, aiohttp.ClientError) as error:
            # Fail closed, as a VMI admitted without its presets would run unlike its spec.
            raise PresetError(
                f"cannot read the VirtualMachineInstancePresets of namespace {namespace!r}: {error}"
            ) from None
        return [p for p in as_list(as_map(listing).get("items")) if isinstance(p, Mapping)]


def annotation_key(preset_name: str) -> str:
    """The annotation a VMI carries for each preset applied to it."""
    return f"{ANNOTATION_PREFIX}{preset_name}"


def deprecation_warnings(vmi: Mapping[str, Any]) -> list[str]:
    """Upstream's admission warning for a VMI that carries a preset annotation."""
    annotations = as_map(as_map(vmi.get("metadata")).get("annotations"))
    return [DEPRECATION_WARNING] if any("virtualmachinepreset" in k for k in annotations) else []


def apply_presets(vmi: Mapping[str, Any], presets: Sequence[Mapping[str, Any]]) -> PresetOutcome:
    """`vmi` (a copy) with the matching presets merged; raises PresetError as upstream refuses."""
    out = copy.deepcopy(dict(vmi))
    metadata = as_map(out.get("metadata"))
    if as_map(metadata.get("annotations")).get(EXCLUDE_ANNOTATION) == "true":
        log.info("VMI excluded from preset logic", vmi=metadata.get("name"))
        return PresetOutcome(out)
    labels = as_map(metadata.get("labels"))
    chosen = []
    for preset in presets:
        selector = as_map(as_map(preset.get("spec")).get("selector"))
        try:
            if matches(selector, labels, empty_matches_all=True):
                chosen.append(preset)
        except SelectorError as error:
            raise PresetError(f"preset '{_name(preset)}': {error}") from None
    if not chosen:
        return PresetOutcome(out)
    _refuse_conflicting(chosen)
    spec = out.get("spec")
    domain = spec.get("domain") if isinstance(spec, dict) else None
    if not isinstance(domain, dict):
        return PresetOutcome(out)  # not a VMI the validating webhook will admit anyway
    applied: list[str] = []
    for preset in chosen:
        name = _name(preset)
        ok, problems = _merge(_domain(preset), domain)
        if ok:
            if problems:
                log.warning(
                    f"Some settings were not applied for VirtualMachineInstancePreset '{name}'",
                    conflicts=_aggregate(problems),
                )
            annotations = out.setdefault("metadata", {}).setdefault("annotations", {})
            annotations[annotation_key(name)] = APPLIED_VALUE
            applied.append(name)
        else:
            log.warning(
                f"Unable to apply VirtualMachineInstancePreset '{name}'",
                conflicts=_aggregate(problems),
            )
    return PresetOutcome(out, tuple(applied))


def _name(preset: Mapping[str, Any]) -> str:
    return str(as_map(preset.get("metadata")).get("name") or "")


def _domain(preset: Mapping[str, Any]) -> Mapping[str, Any]:
    return as_map(as_map(preset.get("spec")).get("domain"))


def _aggregate(problems: Sequence[str]) -> str:
    """Go's utilerrors.Aggregate wording: one error alone, several in brackets."""
    return problems[0] if len(problems) == 1 else f"[{', '.join(problems)}]"


def _refuse_conflicting(presets: Sequence[Mapping[str, Any]]) -> None:
    problems = [
        f"presets '{_name(preset)}' and '{_name(seen)}' conflict: {_aggregate(found)}"
        for i, preset in enumerate(presets)
        for seen in presets[:i]
        if (found := _conflicts(_domain(preset), _domain(seen)))
    ]
    if problems:
        raise PresetError(
            f"VirtualMachinePresets cannot be applied due to conflicts: {_aggregate(problems)}"
        )


def _get(domain: Mapping[str, Any], path: Sequence[str]) -> Any:
    value: Any = domain
    for part in path:
        value = value.get(part) if isinstance(value, Mapping) else None
    return value


def _pruned(value: Any) -> Any:
    """Nulls dropped, as a Go struct decodes them (absent and null read the same)."""
    if isinstance(value, Mapping):
        return {k: _pruned(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_pruned(v) for v in value]
    return value


def _same(a: Any, b: Any) -> bool:
    return bool(_pruned(a) == _pruned(b))


def _show(value: Any) -> str:
    return json.dumps(_pruned(value), sort_keys=True, separators=(",", ":"))


def _same_quantity(a: object, b: object) -> bool:
    try:
        return Quantity.parse(a) == Quantity.parse(b)
    except QuantityError:
        return a == b


def _requests(domain: Mapping[str, Any]) -> Mapping[str, Any]:
    return as_map(as_map(domain.get("resources")).get("requests"))


def _same_requests(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return a.keys() == b.keys() and all(_same_quantity(a[k], b[k]) for k in a)


def _offset(clock: Mapping[str, Any]) -> dict[str, Any]:
    return {k: clock[k] for k in _CLOCK_OFFSET if clock.get(k) is not None}


def _conflicts(preset: Mapping[str, Any], vmi: Mapping[str, Any]) -> list[str]:
    """Where both set a section and disagree (upstream's checkMergeConflicts)."""
    problems = []
    theirs = _requests(vmi)
    for key, value in _requests(preset).items():
        if key in theirs and not _same_quantity(value, theirs[key]):
            problems.append(f"spec.resources.requests[{key}]: {value} != {theirs[key]}")
    for path in _SECTIONS:
        a, b = _get(preset, path), _get(vmi, path)
        if a is not None and b is not None and not _same(a, b):
            problems.append(f"spec.{'.'.join(path)}: {_show(a)} != {_show(b)}")
    pclock, vclock = preset.get("clock"), vmi.get("clock")
    if isinstance(pclock, Mapping) and isinstance(vclock, Mapping):
        if not _same(_offset(pclock), _offset(vclock)):
            problems.append(
                f"spec.clock.clockoffset: {_show(_offset(pclock))} != {_show(_offset(vclock))}"
            )
        ptimer, vtimer = pclock.get("timer"), vclock.get("timer")
        if ptimer is not None and vtimer is not None and not _same(ptimer, vtimer):
            problems.append(f"spec.clock.timer: {_show(ptimer)} != {_show(vtimer)}")
    return problems


def _merge(preset: Mapping[str, Any], domain: dict[str, Any]) -> tuple[bool, list[str]]:
    """Fill `domain` from `preset` where it has nothing; (applied, conflicts) as upstream."""
    problems = _conflicts(preset, domain)
    applied = False
    wanted = _requests(preset)
    if wanted:
        resources = domain.setdefault("resources", {})
        if isinstance(resources, dict):
            if resources.get("requests") is None:  # a nil map upstream; {} is not nil
                resources["requests"] = copy.deepcopy(dict(wanted))
            applied |= _same_requests(as_map(resources.get("requests")), wanted)
    for path in _SECTIONS:
        value = _get(preset, path)
        if value is None:
            continue
        parent: Any = domain
        for part in path[:-1]:
            parent = parent.setdefault(part, {}) if isinstance(parent, dict) else None
        if not isinstance(parent, dict):
            continue
        if parent.get(path[-1]) is None:
            parent[path[-1]] = copy.deepcopy(value)
        applied |= _same(parent[path[-1]], value)
    pclock = preset.get("clock")
    if isinstance(pclock, Mapping):
        if domain.get("clock") is None:
            domain["clock"] = copy.deepcopy(_offset(pclock))
        clock = domain["clock"]
        if isinstance(clock, dict):
            applied |= _same(clock, pclock)
            ptimer = pclock.get("timer")
            if ptimer is not None:
                if clock.get("timer") is None:
                    clock["timer"] = copy.deepcopy(ptimer)
                applied |= _same(clock["timer"], ptimer)
    return applied, problems
