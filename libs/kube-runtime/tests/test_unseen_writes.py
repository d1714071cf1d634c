"""UnseenWrites: a key waits while the cache still holds the version our write replaced."""

from __future__ import annotations

from kube_runtime import UnseenWrites, freeze


def _obj(rv: str) -> dict[str, object]:
    return {"metadata": {"name": "a", "resourceVersion": rv}}


def test_the_replaced_version_is_pending_until_the_cache_moves_past_it() -> None:
    unseen = UnseenWrites()
    unseen.wrote("ns/a", freeze(_obj("7")), _obj("8"))
    assert unseen.pending("ns/a", freeze(_obj("7")))
    assert not unseen.pending("ns/a", freeze(_obj("8")))
    # Moved past once: an older copy again (a relist's) is no longer ours to wait on.
    assert not unseen.pending("ns/a", freeze(_obj("7")))
    assert len(unseen) == 0


def test_another_writers_version_also_ends_the_wait() -> None:
    unseen = UnseenWrites()
    unseen.wrote("ns/a", _obj("7"), _obj("8"))
    assert not unseen.pending("ns/a", _obj("9"))


def test_a_write_that_changed_nothing_leaves_nothing_to_wait_for() -> None:
    unseen = UnseenWrites()
    unseen.wrote("ns/a", _obj("7"), _obj("7"))  # a no-op patch keeps the version
    unseen.wrote("ns/b", _obj("7"), {})  # an answer without a version
    unseen.wrote("ns/c", _obj("7"), None)
    assert not unseen.pending("ns/a", _obj("7"))
    assert not unseen.pending("ns/b", _obj("7"))
    assert not unseen.pending("ns/c", _obj("7"))


def test_other_keys_and_forgotten_keys_are_not_pending() -> None:
    unseen = UnseenWrites()
    unseen.wrote("ns/a", _obj("7"), _obj("8"))
    assert not unseen.pending("ns/b", _obj("7"))
    unseen.forget("ns/a")
    assert not unseen.pending("ns/a", _obj("7"))
