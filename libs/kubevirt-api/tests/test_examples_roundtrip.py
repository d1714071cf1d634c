"""Every object of our kinds in upstream's examples loads and dumps back unchanged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from kubevirt_api import InvalidObjectError, dump, kind_for, load_object

EXAMPLES = Path(__file__).resolve().parents[3] / "compat" / "upstream-kubevirt" / "examples"
NOT_OURS = {
    ("scheduling.k8s.io/v1", "PriorityClass"),
    ("resource.k8s.io/v1", "ResourceClaimTemplate"),
}


def _documents() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        for index, doc in enumerate(yaml.safe_load_all(path.read_text())):
            if doc:
                found.append((f"{path.name}#{index}", doc))
    return found


DOCUMENTS = _documents()
OURS = [(name, doc) for name, doc in DOCUMENTS if (doc["apiVersion"], doc["kind"]) not in NOT_OURS]


def test_corpus_has_the_expected_size() -> None:
    assert len(list(EXAMPLES.glob("*.yaml"))) == 47
    assert len(OURS) == 44


@pytest.mark.parametrize(("name", "doc"), OURS, ids=[name for name, _ in OURS])
def test_example_round_trips(name: str, doc: dict[str, Any]) -> None:
    obj = load_object(doc)
    info = kind_for(doc["apiVersion"], doc["kind"])
    assert info is not None
    assert isinstance(obj, info.model)
    assert dump(obj) == doc


def test_unknown_fields_survive_at_every_level() -> None:
    doc = dict(OURS[0][1])
    doc = yaml.safe_load(yaml.safe_dump(doc))
    doc["futureTopLevel"] = {"x": [1, 2]}
    doc["metadata"]["futureMeta"] = "m"
    doc["spec"]["futureSpec"] = None
    obj = load_object(doc)
    assert obj.extra["futureTopLevel"] == {"x": [1, 2]}
    assert dump(obj) == doc


def test_kinds_that_are_not_ours_are_refused_by_name() -> None:
    others = [doc for _, doc in DOCUMENTS if (doc["apiVersion"], doc["kind"]) in NOT_OURS]
    assert len(others) == 3
    for doc in others:
        with pytest.raises(InvalidObjectError) as caught:
            load_object(doc)
        assert caught.value.errors[0].path == "kind"
        assert doc["kind"] in caught.value.errors[0].message
