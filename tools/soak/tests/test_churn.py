"""The churn scheduler: only actions that fit the VM's state, a VM left alone after each
action, and the same choices for the same seed."""

from __future__ import annotations

import random

from kv_soak.churn import Action, ChurnScheduler, possible_actions
from kv_soak.model import Snapshot, Uid, VmiView, VmView


def _snapshot(**vms: tuple[str, VmiView | None]) -> Snapshot:
    return Snapshot(
        0.0,
        0.0,
        vms={n: VmView(n, strategy) for n, (strategy, _) in vms.items()},
        vmis={n: v for n, (_, v) in vms.items() if v is not None},
    )


def _vmi(name: str, phase: str = "Running", **kw: bool) -> VmiView:
    return VmiView(name, Uid(f"uid-{name}"), phase, ready=phase == "Running", **kw)


def test_actions_fit_the_vms_state() -> None:
    snapshot = _snapshot(
        running=("Always", _vmi("running")),
        paused=("Always", _vmi("paused", paused=True)),
        halted=("Halted", None),
        stopping=("Halted", _vmi("stopping")),
        starting=("Always", _vmi("starting", "Scheduling")),
        migrating=("Always", _vmi("migrating", migrating=True)),
    )
    assert possible_actions(snapshot, "gone", migrations=True) == (Action.CREATE,)
    assert possible_actions(snapshot, "running", migrations=True) == (
        Action.STOP,
        Action.RESTART,
        Action.DELETE,
        Action.PAUSE,
        Action.MIGRATE,
    )
    assert Action.MIGRATE not in possible_actions(snapshot, "running", migrations=False)
    assert possible_actions(snapshot, "paused", migrations=True) == (Action.UNPAUSE,)
    assert possible_actions(snapshot, "halted", migrations=True) == (Action.START, Action.DELETE)
    for busy in ("stopping", "starting", "migrating"):
        assert possible_actions(snapshot, busy, migrations=True) == ()


def test_a_touched_vm_is_left_alone_for_the_settle_time() -> None:
    snapshot = _snapshot(a=("Always", _vmi("a")))
    scheduler = ChurnScheduler(random.Random(1), ["a"], settle=20.0, migrations=True)
    pick = scheduler.pick(snapshot, now=100.0)
    assert pick is not None
    assert pick.name == "a"
    scheduler.touched("a", 100.0)
    assert scheduler.pick(snapshot, now=119.0) is None
    assert scheduler.pick(snapshot, now=120.0) is not None
    assert scheduler.touched_since("a", 100.0)
    assert not scheduler.touched_since("a", 100.5)


def _draws(seed: int) -> list[tuple[str, Action]]:
    names = [f"vm{i}" for i in range(5)]
    snapshot = _snapshot(**{n: ("Always", _vmi(n)) for n in names})
    scheduler = ChurnScheduler(random.Random(seed), names, settle=0.0, migrations=True)
    picks = [scheduler.pick(snapshot, float(t)) for t in range(30)]
    return [(p.name, p.action) for p in picks if p is not None]


def test_the_same_seed_replays_the_same_choices() -> None:
    assert _draws(7) == _draws(7)
    assert _draws(7) != _draws(8)
    assert {a for _, a in _draws(7)} >= {Action.STOP, Action.PAUSE, Action.MIGRATE}


def test_creates_draw_a_run_strategy_that_must_keep_running() -> None:
    scheduler = ChurnScheduler(
        random.Random(3), [f"v{i}" for i in range(40)], settle=0.0, migrations=False
    )
    strategies = {p.run_strategy for t in range(40) if (p := scheduler.pick(Snapshot(0.0, 0.0), t))}
    assert strategies == {"Always", "RerunOnFailure"}
