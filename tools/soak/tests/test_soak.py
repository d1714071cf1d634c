"""The whole soak loop on a fake cluster and a fake clock: it boots, churns, kills every
kind of component, settles and reports; a cluster that breaks an invariant fails it."""

from __future__ import annotations

import asyncio
import io
import itertools
import random
from dataclasses import dataclass, field

import pytest
from kube_runtime import ManualClock
from kv_soak.churn import Action, ActionError
from kv_soak.faults import Kill, NoTargetError, Target
from kv_soak.invariants import DUPLICATE_LAUNCHERS, LOST_VMS
from kv_soak.model import PodView, QemuView, Snapshot, Uid, VmiView, VmView
from kv_soak.report import render
from kv_soak.soak import NOT_CONVERGED, Soak, SoakReport, SoakSettings

_uids = itertools.count(1)


@dataclass
class FakeVm:
    strategy: str
    uid: str = ""
    phase: str = ""
    paused: bool = False
    ready_at: float = 0.0
    extra_pods: list[str] = field(default_factory=list)


class FakeCluster:
    """A cluster whose VMIs reach Running `boot` seconds after they are made, with one
    launcher pod and one QEMU each; faults and a broken controller are played by hand."""

    def __init__(self, clock: ManualClock, *, boot: float = 3.0) -> None:
        self.clock = clock
        self.boot = boot
        self.vms: dict[str, FakeVm] = {}
        self.api_down_until = 0.0
        self.killed: list[Target] = []
        self.acts: list[tuple[str, Action]] = []
        #: Bugs to play: a restart leaves the old launcher pod running; a guest is mute.
        self.leak_pod_on_restart = False
        self.mute: set[str] = set()
        self.handler_stays_down = False
        self.pause_answers: int | None = None
        self.requests = 0

    def _new_vmi(self, vm: FakeVm) -> None:
        vm.uid, vm.phase, vm.paused = f"uid-{next(_uids)}", "Scheduling", False
        vm.ready_at = self.clock.monotonic() + self.boot

    # Observer
    async def snapshot(self) -> Snapshot:
        now = self.clock.monotonic()
        if now < self.api_down_until:
            raise ConnectionRefusedError("apiserver down")
        self.requests += 3
        vmis, pods, qemus = {}, [], []
        for name, vm in self.vms.items():
            if not vm.uid:
                continue
            if vm.phase == "Scheduling" and now >= vm.ready_at:
                vm.phase = "Running"
            vmis[name] = VmiView(
                name, Uid(vm.uid), vm.phase, ready=vm.phase == "Running", paused=vm.paused
            )
            pods.append(PodView(f"launcher-{vm.uid}", Uid(f"pod-{vm.uid}"), Uid(vm.uid), "Running"))
            pods += [PodView(p, Uid(f"pod-{p}"), Uid(vm.uid), "Running") for p in vm.extra_pods]
            if vm.phase == "Running":
                qemus.append(QemuView(1000 + len(qemus), Uid(f"pod-{vm.uid}"), name))
        return Snapshot(
            now,
            1e9 + now,
            vms={n: VmView(n, vm.strategy) for n, vm in self.vms.items()},
            vmis=vmis,
            pods=tuple(pods),
            qemus=tuple(qemus),
        )

    # VmActions
    async def act(self, name: str, action: Action, run_strategy: str) -> None:
        if self.clock.monotonic() < self.api_down_until:
            raise ActionError("connection refused")
        self.acts.append((name, action))
        vm = self.vms.get(name)
        if action is Action.CREATE:
            self.vms[name] = vm = FakeVm(run_strategy)
            self._new_vmi(vm)
        elif vm is None:
            raise ActionError("not found", 404)
        elif action is Action.DELETE:
            del self.vms[name]
        elif action is Action.STOP:
            vm.strategy, vm.uid, vm.phase = "Halted", "", ""
        elif action is Action.START:
            vm.strategy = "Always"
            self._new_vmi(vm)
        elif action is Action.RESTART:
            if self.leak_pod_on_restart:
                vm.extra_pods.append(f"launcher-{vm.uid}-leaked")
            self._new_vmi(vm)
        elif action is Action.PAUSE and self.pause_answers is not None:
            raise ActionError("virt-handler unreachable", self.pause_answers)
        elif action in (Action.PAUSE, Action.UNPAUSE):
            vm.paused = action is Action.PAUSE
        elif action is Action.MIGRATE:
            pass  # lands at once in this fake

    # Injector
    async def kill(self, target: Target, rng: random.Random) -> Kill:
        self.killed.append(target)
        if target is Target.VIRT_LAUNCHER:
            running = sorted(n for n, vm in self.vms.items() if vm.phase == "Running")
            if not running:
                raise NoTargetError("no launcher")
            name = rng.choice(running)
            self._new_vmi(self.vms[name])  # failed, and the VM's strategy starts another
            return Kill(target, f"launcher of {name}", 7, name)
        if target in (Target.KUBE_APISERVER, Target.ETCD):
            self.api_down_until = self.clock.monotonic() + 2.0
        return Kill(target, target.value, 7)

    async def recover(self, kill: Kill, within: float) -> str | None:
        if kill.target is Target.VIRT_HANDLER and self.handler_stays_down:
            await self.clock.sleep(within)
            return "the pod is not Ready"
        while self.clock.monotonic() < self.api_down_until:
            await self.clock.sleep(0.5)
        return None

    # ConsoleProbe
    async def answers(self, name: str, within: float) -> bool:
        return name not in self.mute

    # MetricsSource
    async def apiserver_metrics(self) -> str:
        if self.clock.monotonic() < self.api_down_until:
            raise ConnectionRefusedError("apiserver down")
        return (
            'apiserver_request_total{code="200",group="kubevirt.io",resource="virtualmachines",'
            f'subresource="",verb="LIST"}} {self.requests}\n'
        )


def _settings(**kw: object) -> SoakSettings:
    base: dict[str, object] = dict(
        vms=4,
        minutes=3,
        seed=11,
        churn_interval=2.0,
        churn_settle=5.0,
        fault_gap=(3.0, 6.0),
        boot_timeout=60,
        recover_timeout=30,
        converge_timeout=40,
        settle_timeout=60,
    )
    base.update(kw)
    return SoakSettings(**base)  # type: ignore[arg-type]


async def _run(cluster: FakeCluster, clock: ManualClock, settings: SoakSettings) -> SoakReport:
    out = io.StringIO()
    soak = Soak(
        settings,
        clock=clock,
        observer=cluster,
        actions=cluster,
        injector=cluster,
        console=cluster,
        metrics=cluster,
        progress=out,
    )
    task = asyncio.ensure_future(soak.run())
    for _ in range(20_000):
        if task.done():
            break
        await clock.advance(0.5)
        await asyncio.sleep(0)  # lets the metrics parser's thread hand back
    assert task.done(), out.getvalue()[-2000:]
    report = task.result()
    report.progress = out.getvalue()  # type: ignore[attr-defined]
    return report


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


async def test_a_healthy_cluster_holds_every_invariant(clock: ManualClock) -> None:
    cluster = FakeCluster(clock)
    report = await _run(cluster, clock, _settings())
    assert report.ok, render(report)
    by_target = report.faults_by_target()
    assert set(by_target) == set(Target)  # every kind killed in 3 minutes
    assert all(f.converged_after is not None for f in report.faults)
    assert (report.vms_checked, report.consoles_answered) == (4, 4)
    assert sum(report.churn.values()) > 10
    assert {a for _, a in cluster.acts} >= {Action.STOP, Action.START, Action.PAUSE, Action.MIGRATE}
    assert report.converged_after_last_fault is not None
    assert report.cost.total > 0
    table = render(report)
    assert "every invariant held" in table
    assert "duplicate launcher pods" in table
    assert "--seed 11" in table


async def test_the_same_seed_replays_the_same_run(clock: ManualClock) -> None:
    first = FakeCluster(clock)
    await _run(first, clock, _settings(minutes=1))
    again_clock = ManualClock()
    again = FakeCluster(again_clock)
    await _run(again, again_clock, _settings(minutes=1))
    assert first.killed == again.killed
    assert [a for _, a in first.acts] == [a for _, a in again.acts]


async def test_a_second_launcher_pod_for_one_vmi_breaks_the_run(clock: ManualClock) -> None:
    cluster = FakeCluster(clock)
    cluster.leak_pod_on_restart = True
    report = await _run(cluster, clock, _settings(targets=(Target.VIRT_API,)))
    assert not report.ok
    assert report.count(DUPLICATE_LAUNCHERS) >= 1
    assert "SOME INVARIANTS BROKE" in render(report)


async def test_a_guest_that_does_not_answer_is_lost(clock: ManualClock) -> None:
    cluster = FakeCluster(clock)
    cluster.mute = {"soak-002"}
    report = await _run(cluster, clock, _settings(minutes=0.5, targets=(Target.ETCD,)))
    assert [v.subject for v in report.violations.values() if v.invariant == LOST_VMS] == [
        "soak-002"
    ]


async def test_a_component_that_does_not_come_back_is_not_converged(clock: ManualClock) -> None:
    cluster = FakeCluster(clock)
    cluster.handler_stays_down = True
    report = await _run(
        cluster, clock, _settings(minutes=1, targets=(Target.VIRT_HANDLER,), max_faults=1)
    )
    assert len(report.faults) == 1
    assert report.faults[0].recovered_after is None
    assert report.count(NOT_CONVERGED) == 1
    [violation] = report.violations.values()
    assert "virt-handler not back: the pod is not Ready" in violation.detail


async def test_a_5xx_from_virt_api_with_no_fault_in_progress_breaks_the_run(
    clock: ManualClock,
) -> None:
    cluster = FakeCluster(clock)
    cluster.pause_answers = 503
    report = await _run(cluster, clock, _settings(minutes=2, max_faults=0))
    assert report.faults == []
    assert report.violations == {}
    assert not report.ok
    assert report.virt_api_5xx[0].startswith("503 pause soak-")
    assert "virt-api's 5xx answers while no fault was in progress:" in render(report)


async def test_refusals_that_are_not_5xx_do_not_count(clock: ManualClock) -> None:
    cluster = FakeCluster(clock)
    cluster.pause_answers = 409
    report = await _run(cluster, clock, _settings(minutes=2, max_faults=0))
    assert report.ok, render(report)
    assert report.churn_failed["pause 409"] >= 1
