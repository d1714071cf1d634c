"""Label selectors: matching and the string the scale subresource shows."""

from __future__ import annotations

import pytest
from kubevirt_api.selectors import SelectorError, matches, selector_string


def test_match_labels_and_expressions() -> None:
    sel = {
        "matchLabels": {"app": "web"},
        "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["a", "b"]},
            {"key": "legacy", "operator": "DoesNotExist"},
        ],
    }
    assert matches(sel, {"app": "web", "tier": "a"})
    assert not matches(sel, {"app": "web", "tier": "c"})
    assert not matches(sel, {"app": "web", "tier": "a", "legacy": "1"})
    assert selector_string(sel) == "app=web,tier in (a,b),!legacy"


def test_empty_selector_matches_nothing() -> None:
    assert not matches({}, {"a": "b"})


def test_empty_selector_matches_all_when_asked() -> None:
    assert matches({}, {"a": "b"}, empty_matches_all=True)
    assert not matches({"matchLabels": {"a": "c"}}, {"a": "b"}, empty_matches_all=True)


def test_bad_operator_names_the_field() -> None:
    with pytest.raises(SelectorError, match=r"matchExpressions\[0\].operator"):
        matches({"matchExpressions": [{"key": "a", "operator": "Near"}]}, {})
