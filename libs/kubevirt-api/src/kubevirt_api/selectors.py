"""Kubernetes label selectors (matchLabels + matchExpressions): matching and string form.

Shared by the controllers (replica sets, pools) and admission (presets).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .values import as_map as mapping

__all__ = ["SelectorError", "matches", "selector_string"]


class SelectorError(ValueError):
    """An invalid selector; the message names the field."""


def matches(
    selector: Mapping[str, Any], labels: Mapping[str, str], *, empty_matches_all: bool = False
) -> bool:
    """Whether `labels` satisfy `selector`. An empty selector matches nothing (as for sets),
    or everything with `empty_matches_all` (metav1.LabelSelectorAsSelector, as presets use)."""
    match_labels = mapping(selector.get("matchLabels"))
    expressions = selector.get("matchExpressions") or ()
    if not match_labels and not expressions:
        return empty_matches_all
    for k, v in match_labels.items():
        if labels.get(k) != v:
            return False
    for index, raw in enumerate(expressions):
        expr = mapping(raw)
        raw_key = expr.get("key")
        op = expr.get("operator")
        values = list(expr.get("values") or ())
        if not isinstance(raw_key, str):
            raise SelectorError(f"selector.matchExpressions[{index}].key: required")
        k = raw_key
        if op == "In":
            if labels.get(k) not in values:
                return False
        elif op == "NotIn":
            if k in labels and labels[k] in values:
                return False
        elif op == "Exists":
            if k not in labels:
                return False
        elif op == "DoesNotExist":
            if k in labels:
                return False
        else:
            raise SelectorError(
                f"selector.matchExpressions[{index}].operator: {op!r}; "
                "valid: In, NotIn, Exists, DoesNotExist"
            )
    return True


def selector_string(selector: Mapping[str, Any]) -> str:
    """The `key=value,key in (a,b)` form kubectl and the scale subresource use."""
    parts = [f"{k}={v}" for k, v in sorted(mapping(selector.get("matchLabels")).items())]
    for raw in selector.get("matchExpressions") or ():
        expr = mapping(raw)
        k, op = expr.get("key"), expr.get("operator")
        values = ",".join(sorted(str(v) for v in expr.get("values") or ()))
        if op == "In":
            parts.append(f"{k} in ({values})")
        elif op == "NotIn":
            parts.append(f"{k} notin ({values})")
        elif op == "Exists":
            parts.append(str(k))
        elif op == "DoesNotExist":
            parts.append(f"!{k}")
    return ",".join(parts)
