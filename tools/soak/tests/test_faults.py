"""The fault picker kills every kind of component once per round, in a seeded order."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from kv_soak.faults import FaultPicker, Target


def test_each_round_kills_every_target_once() -> None:
    picker = FaultPicker(random.Random(5), tuple(Target))
    rounds = [[picker.next() for _ in Target] for _ in range(3)]
    for drawn in rounds:
        assert sorted(drawn) == sorted(Target)
    assert len({tuple(r) for r in rounds}) > 1  # shuffled anew each round


def test_the_same_seed_gives_the_same_order_and_subsets_are_kept() -> None:
    def order(seed: int) -> list[Target]:
        picker = FaultPicker(random.Random(seed), (Target.ETCD, Target.KUBELET))
        return [picker.next() for _ in range(6)]

    assert order(1) == order(1)
    assert Counter(order(1)) == {Target.ETCD: 3, Target.KUBELET: 3}


def test_no_targets_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one"):
        FaultPicker(random.Random(0), ())
