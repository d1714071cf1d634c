"""Store: keys, read-only objects, indexes, and relist (replace) semantics."""

from __future__ import annotations

from typing import Any

import pytest
from kube_runtime import DeltaType, Store, freeze, key_of, thaw


def cm(name: str, rv: str, ns: str = "default", node: str = "", owner: str = "") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns, "resourceVersion": rv}
    if owner:
        meta["ownerReferences"] = [{"uid": owner, "controller": True}]
    return {"metadata": meta, "spec": {"nodeName": node}}


def by_node(obj: Any) -> list[str]:
    node = obj["spec"]["nodeName"]
    return [node] if node else []


def by_owner(obj: Any) -> list[str]:
    return [ref["uid"] for ref in obj["metadata"].get("ownerReferences", ())]


def test_keys_are_namespace_slash_name_or_name() -> None:
    assert key_of(cm("a", "1", ns="ns1")) == "ns1/a"
    assert key_of({"metadata": {"name": "node1"}}) == "node1"
    with pytest.raises(ValueError, match=r"metadata\.name"):
        key_of({"metadata": {}})


def test_objects_are_handed_out_read_only_and_thaw_copies() -> None:
    store = Store()
    store.upsert(cm("a", "1"))
    obj = store.get("default/a")
    assert obj is not None
    with pytest.raises(TypeError):
        obj["spec"]["nodeName"] = "x"  # type: ignore[index]
    mutable = thaw(obj)
    mutable["spec"]["nodeName"] = "x"
    assert store.get("default/a")["spec"]["nodeName"] == ""  # type: ignore[index]


def test_caller_mutating_its_input_does_not_change_the_cache() -> None:
    store = Store()
    raw = cm("a", "1", node="n1")
    store.upsert(raw)
    raw["spec"]["nodeName"] = "n2"
    assert store.get("default/a")["spec"]["nodeName"] == "n1"  # type: ignore[index]


def test_indexes_follow_updates_and_deletes() -> None:
    store = Store({"node": by_node, "owner": by_owner})
    store.upsert(cm("a", "1", node="n1", owner="u1"))
    store.upsert(cm("b", "1", node="n1", owner="u2"))
    assert [o["metadata"]["name"] for o in store.by_index("node", "n1")] == ["a", "b"]
    store.upsert(cm("a", "2", node="n2", owner="u1"))
    assert store.index_keys("node", "n1") == {"default/b"}
    assert store.index_keys("node", "n2") == {"default/a"}
    store.delete(cm("b", "3"))
    assert store.index_values("node") == ["n2"]
    assert store.index_keys("owner", "u1") == {"default/a"}
    with pytest.raises(KeyError, match="no index named"):
        store.by_index("nope", "x")


def test_index_added_later_covers_existing_objects() -> None:
    store = Store()
    store.upsert(cm("a", "1", node="n1"))
    store.add_index("node", by_node)
    assert store.index_keys("node", "n1") == {"default/a"}


def test_upsert_and_delete_deltas() -> None:
    store = Store()
    added = store.upsert(cm("a", "1"))
    updated = store.upsert(cm("a", "2"))
    deleted = store.delete(cm("a", "3"))
    assert (added.type, updated.type, deleted.type) == (
        DeltaType.ADDED,
        DeltaType.UPDATED,
        DeltaType.DELETED,
    )
    assert updated.old is not None
    assert updated.old["metadata"]["resourceVersion"] == "1"
    assert deleted.obj["metadata"]["resourceVersion"] == "3"
    assert not deleted.tombstone
    assert len(store) == 0


def test_replace_emits_adds_changed_updates_and_tombstoned_deletes() -> None:
    store = Store({"node": by_node})
    store.upsert(cm("same", "1"))
    store.upsert(cm("changed", "1", node="n1"))
    store.upsert(cm("gone", "1", node="n9"))
    deltas = store.replace([cm("same", "1"), cm("changed", "5", node="n2"), cm("new", "6")])
    summary = sorted((d.type.value, d.key, d.tombstone) for d in deltas)
    assert summary == [
        ("ADDED", "default/new", False),
        ("DELETED", "default/gone", True),
        ("UPDATED", "default/changed", False),
    ]
    gone = next(d for d in deltas if d.type is DeltaType.DELETED)
    assert gone.obj["spec"]["nodeName"] == "n9", "tombstone carries the last known state"
    assert sorted(store.keys()) == ["default/changed", "default/new", "default/same"]
    assert store.index_values("node") == ["n2"]


def test_frozen_objects_serialize_and_copy_into_mutable_dicts() -> None:
    import copy
    import json
    import pickle

    frozen = freeze(cm("a", "1", node="n1"))
    assert json.loads(json.dumps(frozen)) == cm("a", "1", node="n1")
    for mutator in (
        lambda o: o.update(x=1),
        lambda o: o.pop("spec"),
        lambda o: o.setdefault("x", 1),
        lambda o: o["metadata"].clear(),
    ):
        with pytest.raises(TypeError, match="read-only"):
            mutator(frozen)
    deep = copy.deepcopy(frozen)
    deep["spec"]["nodeName"] = "n2"
    assert frozen["spec"]["nodeName"] == "n1"
    assert pickle.loads(pickle.dumps(frozen)) == cm("a", "1", node="n1")
