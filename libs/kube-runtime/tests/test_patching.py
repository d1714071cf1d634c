"""Patch builders: RFC 7386 merge-patch diffs and RFC 6902 pointers and guarded replaces."""

from __future__ import annotations

from kube_runtime import freeze, merge_patch_between, pointer, replace_if_unchanged


def test_merge_patch_between_contains_only_changes_and_nulls_removals() -> None:
    old = {"metadata": {"labels": {"a": "1", "b": "2"}}, "spec": {"x": [1, 2]}, "gone": 1}
    new = {"metadata": {"labels": {"a": "1", "c": "3"}}, "spec": {"x": [1, 2, 3]}}
    assert merge_patch_between(old, new) == {
        "gone": None,
        "metadata": {"labels": {"b": None, "c": "3"}},
        "spec": {"x": [1, 2, 3]},
    }


def test_merge_patch_accepts_frozen_cache_objects() -> None:
    old = freeze({"status": {"phase": "Pending", "conditions": [{"type": "Ready"}]}})
    new = {"status": {"phase": "Running", "conditions": [{"type": "Ready"}]}}
    assert merge_patch_between(old, new) == {"status": {"phase": "Running"}}


def test_pointer_escapes_slash_and_tilde() -> None:
    assert pointer("metadata", "labels", "kubevirt.io/node~x") == (
        "/metadata/labels/kubevirt.io~1node~0x"
    )
    assert pointer("spec", "volumes", 0) == "/spec/volumes/0"


def test_replace_if_unchanged_guards_with_a_test_op() -> None:
    assert replace_if_unchanged("/status/phase", "Pending", "Running") == [
        {"op": "test", "path": "/status/phase", "value": "Pending"},
        {"op": "replace", "path": "/status/phase", "value": "Running"},
    ]
    assert replace_if_unchanged("/status/phase", None, "Running") == [
        {"op": "add", "path": "/status/phase", "value": "Running"}
    ]
